// SoftmaxCrossEntropyLoss and its gradient over scores x [N, C, d...]: row r is (n, d...), its
// class c at base + c * INNER. One work-group of WG work-items per row: an LLM's vocabulary row
// (C = 128256) is far too long for one work-item, and rows are few (tokens).
//   _rows  -log_softmax(x)[label] per row and whether the label counts (ignore_index); also
//          log_prob if the graph wants it;
//   _sum   one work-item adds the rows in order (reduction mean or sum);
//   _grad  fbl.SoftmaxCrossEntropyLossGrad: dx = dloss * (softmax(x) - onehot(label)) / count
//          ("mean"; count = rows whose label is not ignore_index), zero on ignored rows.
// A label outside [0, C) counts as ignored (VALID): x is read at a label only when it is valid,
// so no label makes a read outside x. The runtime refuses such labels before any launch; this
// guard is for labels it never saw. With every row ignored, "mean" is 0 / 0 = NaN, as in PyTorch.
#define WG {{WG}}u
#define NCLASS {{C}}u
#define INNER {{INNER}}u
#define ROWS {{ROWS}}u
#define VALID(l) ((l) != (long)({{IGNORE}}) && (l) >= 0 && (l) < (long)NCLASS)

// log(sum(exp(x))) over the row at `base`: each work-item folds its strided classes into a
// running (max, sum of exp(x - max)), then a tree over local memory merges the pairs.
inline float row_lse(__global const float* x, uint base, __local float* lm, __local float* ls) {
  const uint lid = get_local_id(0);
  float m = -INFINITY, s = 0.0f;
  for (uint c = lid; c < NCLASS; c += WG) {
    const float v = x[base + c * INNER];
    if (v > m) {
      s = s * exp(m - v) + 1.0f;
      m = v;
    } else {
      s += exp(v - m);
    }
  }
  lm[lid] = m;
  ls[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    if (lid < h) {
      const float m1 = lm[lid], m2 = lm[lid + h], mm = fmax(m1, m2);
      const float s1 = m1 == -INFINITY ? 0.0f : ls[lid] * exp(m1 - mm);
      const float s2 = m2 == -INFINITY ? 0.0f : ls[lid + h] * exp(m2 - mm);
      lm[lid] = mm;
      ls[lid] = s1 + s2;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float lse = lm[0] + log(ls[0]);
  barrier(CLK_LOCAL_MEM_FENCE);  // the caller may reuse lm and ls
  return lse;
}

__kernel void {{NAME}}_rows({{PARAMS}}) {
  __local float lm[WG], ls[WG];
  const uint r = get_group_id(0), lid = get_local_id(0);
  const uint base = (r / INNER) * NCLASS * INNER + r % INNER;
  const float lse = row_lse(x, base, lm, ls);
{{LOGPROB}}
  if (lid != 0u) return;
  const long label = labels[r];
  const int valid = VALID(label);
  row_loss[r] = valid ? lse - x[base + (uint)label * INNER] : 0.0f;
  row_w[r] = valid ? 1.0f : 0.0f;
}

__kernel void {{NAME}}_sum(__global const float* row_loss, __global const float* row_w,
                           __global float* loss) {
  if (get_global_id(0) != 0) return;
  float s = 0.0f, w = 0.0f;
  for (uint r = 0; r < ROWS; ++r) { s += row_loss[r]; w += row_w[r]; }
  loss[0] = {{MEAN}} ? s / w : s;
}

__kernel void {{NAME}}_grad(__global const float* dloss, __global const float* x,
                            __global const {{TL}}* labels, __global float* dx) {
  __local float lm[WG], ls[WG];
  const uint r = get_group_id(0), lid = get_local_id(0);
  const uint base = (r / INNER) * NCLASS * INNER + r % INNER;
  // The valid labels over every row, counted by the whole group.
  float cnt = 0.0f;
  for (uint k = lid; k < ROWS; k += WG) cnt += VALID(labels[k]) ? 1.0f : 0.0f;
  lm[lid] = cnt;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    if (lid < h) lm[lid] += lm[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float count = lm[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  const float lse = row_lse(x, base, lm, ls);
  const long label = labels[r];
  const float scale = VALID(label) ? dloss[0] / ({{MEAN}} ? count : 1.0f) : 0.0f;
  for (uint c = lid; c < NCLASS; c += WG) {
    const uint o = base + c * INNER;
    dx[o] = scale * (exp(x[o] - lse) - ((long)c == label ? 1.0f : 0.0f));
  }
}
