// Direct 2-D convolution with groups (depthwise included): x [BATCH,C,H,W], w [M,C/G,KH,KW],
// y [BATCH,M,OH,OW]; output channel m reads input channels [m / MG * CG, +CG). One work-item per
// output element. Every size is a literal, so unit strides, dilations and zero pads fold away.
__kernel void {{NAME}}({{PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{NY}}u) return;
  const uint ow = i % {{OW}}u, oh = i / {{OW}}u % {{OH}}u;
  const uint m = i / ({{OW}}u * {{OH}}u) % {{M}}u, n = i / ({{OW}}u * {{OH}}u * {{M}}u);
  const uint c0 = m / {{MG}}u * {{CG}}u;
  float acc = 0.0f;
  for (uint c = 0; c < {{CG}}u; ++c)
    for (uint kh = 0; kh < {{KH}}u; ++kh) {
      const int ih = (int)(oh * {{SH}}u + kh * {{DH}}u) - {{PH}};
      if (ih < 0 || ih >= {{H}}) continue;
      for (uint kw = 0; kw < {{KW}}u; ++kw) {
        const int iw = (int)(ow * {{SW}}u + kw * {{DW}}u) - {{PW}};
        if (iw < 0 || iw >= {{W}}) continue;
        acc += x[((n * {{C}}u + c0 + c) * {{H}}u + (uint)ih) * {{W}}u + (uint)iw] *
               w[((m * {{CG}}u + c) * {{KH}}u + kh) * {{KW}}u + kw];
      }
    }
  y[i] = acc{{BIAS}};
}
