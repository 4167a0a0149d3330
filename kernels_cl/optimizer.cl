// Optimizer updates, one work-item per parameter element (PyTorch's formulas). ADAM_INDEX and
// SGD_INDEX declare each operand's element offset (o_p, o_g, o_m, o_v, o_b) from i through its
// layout (the kernel not instantiated gets row-major ones); an output lies where the input it
// updates does.
// AdamW: p *= 1 - lr*wd; m, v = EMAs of g and g^2; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
// With the training loop's inputs (ADAM_LOOP_PARAMS) the lr is read from lr_in and g is scaled by
// grad_scale (clipping) first.
__kernel void {{NAME}}_adamw(__global const float* p, __global const float* g,
                             __global const float* m, __global const float* v,
                             __global const long* step{{ADAM_LOOP_PARAMS}}, __global float* p_out,
                             __global float* m_out, __global float* v_out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{ADAM_INDEX}}
  const float t = (float)step[0];
  const float bc1 = 1.0f - pow({{BETA1}}, t);
  const float bc2 = 1.0f - pow({{BETA2}}, t);
  const float gi = g[o_g]{{GRAD_SCALE}};
  const float mi = {{BETA1}} * m[o_m] + (1.0f - {{BETA1}}) * gi;
  const float vi = {{BETA2}} * v[o_v] + (1.0f - {{BETA2}}) * gi * gi;
  const float pi = p[o_p] * (1.0f - {{LR}} * {{WD}});
  p_out[o_p] = pi - ({{LR}} / bc1) * mi / (sqrt(vi) / sqrt(bc2) + {{EPS}});
  m_out[o_m] = mi;
  v_out[o_v] = vi;
}

// SGD with optional momentum buffer: g += wd*p; buf = momentum*buf + g; p -= lr*buf.
__kernel void {{NAME}}_sgd({{SGD_PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{SGD_INDEX}}
  const float gi = g[o_g] + {{WD}} * p[o_p];
{{SGD_BODY}}
}
