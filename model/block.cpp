#include "model/block.hpp"

namespace tetra {

Tensor param_view(const Tensor& flat, const ParamInfo& p) {
  Tensor t = flat.flat(p.offset, p.numel());
  return p.local_shape.size() == 2 ? t.reshape({p.local_shape[0], p.local_shape[1]}) : t;
}

namespace {

struct Dims {
  int64_t T, Tl, d, hd, S, Sk, B, F;
  int H, KV;  // heads on this TP rank
  explicit Dims(const BlockContext& ctx) {
    const ModelConfig& c = ctx.cfg;
    const int tp = ctx.tp.size();
    T = ctx.pos.tokens();
    Tl = ctx.tp.local_rows(T);
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

// [rows, cols] view of a buffer.
Tensor v2(const Buffer& b, int64_t rows, int64_t cols) {
  return b.view({rows, cols});
}

}  // namespace

void block_forward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                   const Tensor& x, Tensor out, BlockActs& a) {
  Backend& be = ctx.be;
  const TensorParallel& tp = ctx.tp;
  const Dims n(ctx);
  const Weights w(u, w_flat);
  const double theta = ctx.cfg.rope_theta;
  const int64_t qw = n.H * n.hd, kw = n.KV * n.hd;

  // Attention half: n1 on all T tokens, q k v column-parallel, o row-parallel.
  Buffer n1(be, n.Tl * n.d);
  a.rstd1 = Buffer(be, n.Tl);
  be.rmsnorm_forward(v2(n1, n.Tl, n.d), a.rstd1.flat(), x, w[kInputNorm], ctx.cfg.norm_eps);
  a.n1 = tp.gather(be, std::move(n1));
  a.q = Buffer(be, n.T * qw);
  Buffer k(be, n.T * kw), v(be, n.T * kw);
  const Tensor n1v = v2(a.n1, n.T, n.d), q = v2(a.q, n.T, qw);
  ColumnParallelLinear::forward(be, q, n1v, w[kQ]);
  ColumnParallelLinear::forward(be, v2(k, n.T, kw), n1v, w[kK]);
  ColumnParallelLinear::forward(be, v2(v, n.T, kw), n1v, w[kV]);
  be.rope(q, n.H, ctx.pos.token_pos, theta, false);
  be.rope(v2(k, n.T, kw), n.KV, ctx.pos.token_pos, theta, false);
  a.k = ctx.cp.gather_kv(be, std::move(k), n.B);  // [B * Sk, kw]: every CP rank's keys
  a.v = ctx.cp.gather_kv(be, std::move(v), n.B);
  a.attn = Buffer(be, n.T * qw);
  a.lse = Buffer(be, n.B * n.H * n.S);
  be.attention_forward(v2(a.attn, n.T, qw), a.lse.flat(), q, v2(a.k, n.B * n.Sk, kw),
                       v2(a.v, n.B * n.Sk, kw), ctx.pos.seq_pos, ctx.pos.key_pos, n.attn());
  Buffer o(be, n.T * n.d);
  RowParallelLinear::forward(be, v2(o, n.T, n.d), v2(a.attn, n.T, qw), w[kO]);
  a.h = tp.reduce(be, std::move(o));
  const Tensor h = v2(a.h, n.Tl, n.d);
  be.add(h, x);

  // MLP half.
  Buffer n2(be, n.Tl * n.d);
  a.rstd2 = Buffer(be, n.Tl);
  be.rmsnorm_forward(v2(n2, n.Tl, n.d), a.rstd2.flat(), h, w[kPostNorm], ctx.cfg.norm_eps);
  a.n2 = tp.gather(be, std::move(n2));
  a.gate = Buffer(be, n.T * n.F);
  a.up = Buffer(be, n.T * n.F);
  a.act = Buffer(be, n.T * n.F);
  const Tensor n2v = v2(a.n2, n.T, n.d), gate = v2(a.gate, n.T, n.F), up = v2(a.up, n.T, n.F),
               act = v2(a.act, n.T, n.F);
  ColumnParallelLinear::forward(be, gate, n2v, w[kGate]);
  ColumnParallelLinear::forward(be, up, n2v, w[kUp]);
  be.swiglu_forward(act, gate, up);
  Buffer down(be, n.T * n.d);
  RowParallelLinear::forward(be, v2(down, n.T, n.d), act, w[kDown]);
  const Buffer y = tp.reduce(be, std::move(down));
  be.add3(out, y.flat(), h);
}

void block_backward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                    Tensor dw_flat, const Tensor& x, const Tensor& dout, Tensor dx,
                    const BlockActs& a) {
  Backend& be = ctx.be;
  const TensorParallel& tp = ctx.tp;
  const Dims n(ctx);
  const Weights w(u, w_flat), dw(u, dw_flat);
  const double theta = ctx.cfg.rope_theta;
  const int64_t qw = n.H * n.hd, kw = n.KV * n.hd;

  // MLP half: out = h + down(act). The row-parallel weight needs dout on all T tokens.
  Buffer dout_store;
  const Tensor dout_full = tp.gather(be, dout, dout_store);
  Buffer dact(be, n.T * n.F), dgate(be, n.T * n.F), dup(be, n.T * n.F);
  RowParallelLinear::backward(be, v2(dact, n.T, n.F), dw[kDown], dout_full, v2(a.act, n.T, n.F),
                              w[kDown]);
  be.swiglu_backward(v2(dgate, n.T, n.F), v2(dup, n.T, n.F), v2(dact, n.T, n.F),
                     v2(a.gate, n.T, n.F), v2(a.up, n.T, n.F));
  Buffer dn2(be, n.T * n.d);
  const Tensor n2 = v2(a.n2, n.T, n.d);
  ColumnParallelLinear::backward(be, v2(dn2, n.T, n.d), dw[kGate], v2(dgate, n.T, n.F), n2,
                                 w[kGate], false);
  ColumnParallelLinear::backward(be, v2(dn2, n.T, n.d), dw[kUp], v2(dup, n.T, n.F), n2, w[kUp],
                                 true);
  const Buffer dn2_local = tp.reduce(be, std::move(dn2));
  Buffer dh(be, n.Tl * n.d);
  const Tensor dhv = v2(dh, n.Tl, n.d);
  be.rmsnorm_backward(dhv, dw[kPostNorm], v2(dn2_local, n.Tl, n.d), v2(a.h, n.Tl, n.d),
                      w[kPostNorm], a.rstd2.flat());
  be.add(dhv, dout);

  // Attention half: h = x + o(attn).
  Buffer dh_store;
  const Tensor dh_full = tp.gather(be, dhv, dh_store);
  Buffer dattn(be, n.T * qw);
  RowParallelLinear::backward(be, v2(dattn, n.T, qw), dw[kO], dh_full, v2(a.attn, n.T, qw), w[kO]);
  const int64_t keys = n.B * n.Sk;
  Buffer dq(be, n.T * qw), dk_all(be, keys * kw), dv_all(be, keys * kw);
  const Tensor dqv = v2(dq, n.T, qw);
  be.attention_backward(dqv, v2(dk_all, keys, kw), v2(dv_all, keys, kw), v2(dattn, n.T, qw),
                        v2(a.q, n.T, qw), v2(a.k, keys, kw), v2(a.v, keys, kw), v2(a.attn, n.T, qw),
                        a.lse.flat(), ctx.pos.seq_pos, ctx.pos.key_pos, n.attn());
  const Buffer dk = ctx.cp.scatter_kv_grad(be, std::move(dk_all), n.B);  // [T, kw]
  const Buffer dv = ctx.cp.scatter_kv_grad(be, std::move(dv_all), n.B);
  const Tensor dkv = v2(dk, n.T, kw), dvv = v2(dv, n.T, kw);
  be.rope(dqv, n.H, ctx.pos.token_pos, theta, true);
  be.rope(dkv, n.KV, ctx.pos.token_pos, theta, true);
  Buffer dn1(be, n.T * n.d);
  const Tensor dn1v = v2(dn1, n.T, n.d), n1 = v2(a.n1, n.T, n.d);
  ColumnParallelLinear::backward(be, dn1v, dw[kQ], dqv, n1, w[kQ], false);
  ColumnParallelLinear::backward(be, dn1v, dw[kK], dkv, n1, w[kK], true);
  ColumnParallelLinear::backward(be, dn1v, dw[kV], dvv, n1, w[kV], true);
  const Buffer dn1_local = tp.reduce(be, std::move(dn1));
  be.rmsnorm_backward(dx, dw[kInputNorm], v2(dn1_local, n.Tl, n.d), x, w[kInputNorm],
                      a.rstd1.flat());
  be.add(dx, dhv);
}

}  // namespace tetra
