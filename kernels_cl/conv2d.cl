// Direct 2-D convolution (NCHW, OIHW weights, group 1): one work-item per output element.
__kernel void {{NAME}}({{PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const uint ow = i % {{OW}}u, oh = (i / {{OW}}u) % {{OH}}u;
  const uint oc = (i / ({{OW}}u * {{OH}}u)) % {{OC}}u, n = i / ({{OW}}u * {{OH}}u * {{OC}}u);
  float acc = 0.0f;
  for (uint ic = 0; ic < {{IC}}u; ++ic)
    for (uint kh = 0; kh < {{KH}}u; ++kh)
      for (uint kw = 0; kw < {{KW}}u; ++kw) {
        const int ih = (int)(oh * {{SH}}u + kh * {{DH}}u) - {{PH}};
        const int iw = (int)(ow * {{SW}}u + kw * {{DW}}u) - {{PW}};
        if (ih < 0 || iw < 0 || ih >= {{IH}} || iw >= {{IW}}) continue;
        acc += x[((n * {{IC}}u + ic) * {{IH}}u + (uint)ih) * {{IW}}u + (uint)iw] *
               w[((oc * {{IC}}u + ic) * {{KH}}u + kh) * {{KW}}u + kw];
      }
  y[i] = acc{{BIAS}};
}
