// Optimizer updates, one work-item per parameter element (PyTorch's formulas).
// AdamW: p *= 1 - lr*wd; m, v = EMAs of g and g^2; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
__kernel void {{NAME}}_adamw(__global const float* p, __global const float* g,
                             __global const float* m, __global const float* v,
                             __global const long* step, __global float* p_out,
                             __global float* m_out, __global float* v_out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const float t = (float)step[0];
  const float bc1 = 1.0f - pow({{BETA1}}, t);
  const float bc2 = 1.0f - pow({{BETA2}}, t);
  const float gi = g[i];
  const float mi = {{BETA1}} * m[i] + (1.0f - {{BETA1}}) * gi;
  const float vi = {{BETA2}} * v[i] + (1.0f - {{BETA2}}) * gi * gi;
  const float pi = p[i] * (1.0f - {{LR}} * {{WD}});
  p_out[i] = pi - ({{LR}} / bc1) * mi / (sqrt(vi) / sqrt(bc2) + {{EPS}});
  m_out[i] = mi;
  v_out[i] = vi;
}

// SGD with optional momentum buffer: g += wd*p; buf = momentum*buf + g; p -= lr*buf.
__kernel void {{NAME}}_sgd({{SGD_PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const float gi = g[i] + {{WD}} * p[i];
{{SGD_BODY}}
}
