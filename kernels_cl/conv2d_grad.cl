// The two gradients of the grouped 2-D convolution of conv2d_group.cl (same holes, same index
// conventions). Each work-item owns one output element and sums every tap that touches it in a
// fixed order, so no atomics and the result does not depend on scheduling:
//   _dx: one work-item per x element; a tap (kh, kw) reaches it from the output position
//        oh = (ih + PH - kh*DH) / SH when that division is exact and in range;
//   _dw: one work-item per w element, summing dy * x over batch and output positions.
__kernel void {{NAME}}_dx(__global const float* dy, __global const float* w, __global float* dx) {
  const uint i = get_global_id(0);
  if (i >= {{NX}}u) return;
  const uint iw = i % {{W}}u, ih = i / {{W}}u % {{H}}u;
  const uint c = i / ({{W}}u * {{H}}u) % {{C}}u, n = i / ({{W}}u * {{H}}u * {{C}}u);
  const uint m0 = c / {{CG}}u * {{MG}}u, cg = c % {{CG}}u;
  float acc = 0.0f;
  for (uint kh = 0; kh < {{KH}}u; ++kh) {
    const int th = (int)ih + {{PH}} - (int)(kh * {{DH}}u);
    if (th < 0 || th % {{SH}} != 0 || th / {{SH}} >= {{OH}}) continue;
    const uint oh = (uint)(th / {{SH}});
    for (uint kw = 0; kw < {{KW}}u; ++kw) {
      const int tw = (int)iw + {{PW}} - (int)(kw * {{DW}}u);
      if (tw < 0 || tw % {{SW}} != 0 || tw / {{SW}} >= {{OW}}) continue;
      const uint ow = (uint)(tw / {{SW}});
      for (uint m = 0; m < {{MG}}u; ++m)
        acc += dy[((n * {{M}}u + m0 + m) * {{OH}}u + oh) * {{OW}}u + ow] *
               w[(((m0 + m) * {{CG}}u + cg) * {{KH}}u + kh) * {{KW}}u + kw];
    }
  }
  dx[i] = acc;
}

__kernel void {{NAME}}_dw(__global const float* dy, __global const float* x, __global float* dw) {
  const uint i = get_global_id(0);
  if (i >= {{NW}}u) return;
  const uint kw = i % {{KW}}u, kh = i / {{KW}}u % {{KH}}u;
  const uint cg = i / ({{KW}}u * {{KH}}u) % {{CG}}u, m = i / ({{KW}}u * {{KH}}u * {{CG}}u);
  const uint c = m / {{MG}}u * {{CG}}u + cg;
  float acc = 0.0f;
  for (uint n = 0; n < {{BATCH}}u; ++n)
    for (uint oh = 0; oh < {{OH}}u; ++oh) {
      const int ih = (int)(oh * {{SH}}u + kh * {{DH}}u) - {{PH}};
      if (ih < 0 || ih >= {{H}}) continue;
      for (uint ow = 0; ow < {{OW}}u; ++ow) {
        const int iw = (int)(ow * {{SW}}u + kw * {{DW}}u) - {{PW}};
        if (iw < 0 || iw >= {{W}}) continue;
        acc += dy[((n * {{M}}u + m) * {{OH}}u + oh) * {{OW}}u + ow] *
               x[((n * {{C}}u + c) * {{H}}u + (uint)ih) * {{W}}u + (uint)iw];
      }
    }
  dw[i] = acc;
}
