#include "model/block.hpp"

#include "parallel/tp.hpp"

namespace tetra {

Tensor param_view(const Tensor& flat, const ParamInfo& p) {
  Tensor t = flat.flat(p.offset, p.numel());
  return p.local_shape.size() == 2 ? t.reshape({p.local_shape[0], p.local_shape[1]}) : t;
}

namespace {

struct Dims {
  int64_t T, d, hd, S, Sk, B, F;
  int H, KV;  // heads on this TP rank
  Dims(const BlockContext& ctx) {
    const ModelConfig& c = ctx.cfg;
    const int tp = ctx.tp.size();
    T = ctx.pos.tokens();
    B = ctx.pos.batch;
    S = ctx.pos.seq;
    Sk = ctx.pos.key_pos.numel();
    d = c.dim;
    hd = c.head_dim();
    H = c.heads / tp;
    KV = c.kv_heads / tp;
    F = c.ffn_dim / tp;
  }
  AttnShape attn() const { return AttnShape{B, S, Sk, H, KV, int(hd)}; }
};

struct Weights {
  Tensor t[kBlockParams];
  Weights(const UnitLayout& u, const Tensor& flat) {
    for (int i = 0; i < kBlockParams; ++i) t[i] = param_view(flat, u.params[i]);
  }
  const Tensor& operator[](int i) const { return t[i]; }
};

}  // namespace

void block_forward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                   const Tensor& x, Tensor out, BlockActs& a) {
  Backend& be = ctx.be;
  const Dims n(ctx);
  const Weights w(u, w_flat);
  const double theta = ctx.cfg.rope_theta;

  // Attention half.
  a.rstd1 = Buffer(be, n.T);
  a.n1 = Buffer(be, n.T * n.d);
  be.rmsnorm_forward(a.n1.view({n.T, n.d}), a.rstd1.flat(), x, w[kInputNorm], ctx.cfg.norm_eps);
  a.q = Buffer(be, n.T * n.H * n.hd);
  a.k = Buffer(be, n.T * n.KV * n.hd);
  a.v = Buffer(be, n.T * n.KV * n.hd);
  Tensor q = a.q.view({n.T, n.H * n.hd}), k = a.k.view({n.T, n.KV * n.hd}),
         v = a.v.view({n.T, n.KV * n.hd});
  ColumnParallelLinear::forward(be, q, a.n1.view({n.T, n.d}), w[kQ]);
  ColumnParallelLinear::forward(be, k, a.n1.view({n.T, n.d}), w[kK]);
  ColumnParallelLinear::forward(be, v, a.n1.view({n.T, n.d}), w[kV]);
  be.rope(q, n.H, ctx.pos.token_pos, theta, false);
  be.rope(k, n.KV, ctx.pos.token_pos, theta, false);
  a.attn = Buffer(be, n.T * n.H * n.hd);
  a.lse = Buffer(be, n.B * n.H * n.S);
  be.attention_forward(a.attn.view({n.T, n.H * n.hd}), a.lse.flat(), q, k, v, ctx.pos.seq_pos,
                       ctx.pos.key_pos, n.attn());
  a.h = Buffer(be, n.T * n.d);
  Tensor h = a.h.view({n.T, n.d});
  RowParallelLinear::forward(be, ctx.tp, h, a.attn.view({n.T, n.H * n.hd}), w[kO]);
  be.add(h, x);

  // MLP half.
  a.rstd2 = Buffer(be, n.T);
  a.n2 = Buffer(be, n.T * n.d);
  Tensor n2 = a.n2.view({n.T, n.d});
  be.rmsnorm_forward(n2, a.rstd2.flat(), h, w[kPostNorm], ctx.cfg.norm_eps);
  a.gate = Buffer(be, n.T * n.F);
  a.up = Buffer(be, n.T * n.F);
  a.act = Buffer(be, n.T * n.F);
  Tensor gate = a.gate.view({n.T, n.F}), up = a.up.view({n.T, n.F}), act = a.act.view({n.T, n.F});
  ColumnParallelLinear::forward(be, gate, n2, w[kGate]);
  ColumnParallelLinear::forward(be, up, n2, w[kUp]);
  be.swiglu_forward(act, gate, up);
  RowParallelLinear::forward(be, ctx.tp, out, act, w[kDown]);
  be.add(out, h);
}

void block_backward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                    Tensor dw_flat, const Tensor& x, const Tensor& dout, Tensor dx,
                    const BlockActs& a) {
  Backend& be = ctx.be;
  const Dims n(ctx);
  const Weights w(u, w_flat), dw(u, dw_flat);
  const double theta = ctx.cfg.rope_theta;

  // MLP half: out = h + down(act).
  Buffer dact(be, n.T * n.F), dgate(be, n.T * n.F), dup(be, n.T * n.F);
  RowParallelLinear::backward(be, dact.view({n.T, n.F}), dw[kDown], dout, a.act.view({n.T, n.F}),
                              w[kDown]);
  be.swiglu_backward(dgate.view({n.T, n.F}), dup.view({n.T, n.F}), dact.view({n.T, n.F}),
                     a.gate.view({n.T, n.F}), a.up.view({n.T, n.F}));
  Buffer dn2(be, n.T * n.d);
  Tensor n2 = a.n2.view({n.T, n.d});
  ColumnParallelLinear::backward(be, dn2.view({n.T, n.d}), dw[kGate], dgate.view({n.T, n.F}), n2,
                                 w[kGate], false);
  ColumnParallelLinear::backward(be, dn2.view({n.T, n.d}), dw[kUp], dup.view({n.T, n.F}), n2,
                                 w[kUp], true);
  copy_to_tensor_parallel_region_backward(ctx.tp, dn2.flat());
  Buffer dh(be, n.T * n.d);
  Tensor dhv = dh.view({n.T, n.d});
  be.rmsnorm_backward(dhv, dw[kPostNorm], dn2.view({n.T, n.d}), a.h.view({n.T, n.d}), w[kPostNorm],
                      a.rstd2.flat());
  be.add(dhv, dout);

  // Attention half: h = x + o(attn).
  Buffer dattn(be, n.T * n.H * n.hd);
  RowParallelLinear::backward(be, dattn.view({n.T, n.H * n.hd}), dw[kO], dhv,
                              a.attn.view({n.T, n.H * n.hd}), w[kO]);
  Buffer dq(be, n.T * n.H * n.hd), dk(be, n.T * n.KV * n.hd), dv(be, n.T * n.KV * n.hd);
  Tensor dqv = dq.view({n.T, n.H * n.hd}), dkv = dk.view({n.T, n.KV * n.hd}),
         dvv = dv.view({n.T, n.KV * n.hd});
  be.attention_backward(dqv, dkv, dvv, dattn.view({n.T, n.H * n.hd}), a.q.view({n.T, n.H * n.hd}),
                        a.k.view({n.T, n.KV * n.hd}), a.v.view({n.T, n.KV * n.hd}),
                        a.attn.view({n.T, n.H * n.hd}), a.lse.flat(), ctx.pos.seq_pos,
                        ctx.pos.key_pos, n.attn());
  be.rope(dqv, n.H, ctx.pos.token_pos, theta, true);
  be.rope(dkv, n.KV, ctx.pos.token_pos, theta, true);
  Buffer dn1(be, n.T * n.d);
  Tensor dn1v = dn1.view({n.T, n.d}), n1 = a.n1.view({n.T, n.d});
  ColumnParallelLinear::backward(be, dn1v, dw[kQ], dqv, n1, w[kQ], false);
  ColumnParallelLinear::backward(be, dn1v, dw[kK], dkv, n1, w[kK], true);
  ColumnParallelLinear::backward(be, dn1v, dw[kV], dvv, n1, w[kV], true);
  copy_to_tensor_parallel_region_backward(ctx.tp, dn1.flat());
  be.rmsnorm_backward(dx, dw[kInputNorm], dn1v, x, w[kInputNorm], a.rstd1.flat());
  be.add(dx, dhv);
}

}  // namespace tetra
