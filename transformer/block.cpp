// The block as two halves, each one's forward next to its backward. Shapes as in block.hpp;
// every TP collective happens inside a layer of parallel/tp.hpp. Activations and their
// gradients take the dtype of the block's input (bf16 under --dtype bf16); 1/rms and the
// log-sum-exp stay fp32.
#include "transformer/block.hpp"

namespace tetra {

Tensor param_view(const Tensor& flat, const ParamInfo& p) {
  Tensor t = flat.flat(p.offset, p.numel());
  return p.local_shape.size() == 2 ? t.reshape({p.local_shape[0], p.local_shape[1]}) : t;
}

AttnShape attention_shape(const BlockContext& ctx) {
  const int tp = ctx.tp.size();
  const int64_t S = ctx.pos.seq, Sk = ctx.pos.key_pos.numel();
  AttnShape a{ctx.pos.batch, S, Sk, ctx.cfg.heads / tp, ctx.cfg.kv_heads / tp, ctx.cfg.head_dim()};
  // The mask hint (model/backend.hpp): CP's chunks against the sequence's keys, or causal
  // when queries and keys are the same tokens; the CPU checks it against the positions.
  if (ctx.cp.size() > 1)
    a.mask = AttnMask::CpChunks, a.cp = ctx.cp.size(), a.cp_rank = ctx.cp.comm.rank();
  else if (S == Sk)
    a.mask = AttnMask::Causal;
  return a;
}

namespace {

struct Dims {
  int64_t T, Tl, d, hd, S, Sk, B, F;
  int H, KV;       // heads on this TP rank
  int64_t qw, kw;  // widths of q [T, H*hd] and of k, v [T, KV*hd]
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
    qw = H * hd;
    kw = KV * hd;
  }
};

// The block's parameters (or their gradients) as views of its flat unit buffer.
struct Params {
  Tensor t[kBlockParams];
  Params(const UnitLayout& u, const Tensor& flat) {
    for (int i = 0; i < kBlockParams; ++i) t[i] = param_view(flat, u.params[i]);
  }
  const Tensor& operator[](int i) const { return t[i]; }
};

// [rows, cols] view of a buffer.
Tensor v2(const Buffer& b, int64_t rows, int64_t cols) {
  return b.view({rows, cols});
}

// Attention half: a.h [Tl, d] = x + o(attention(rope(q(n1)), rope(k(n1)), v(n1))).
void attention_forward(const BlockContext& ctx, const Dims& n, const Params& w, const Tensor& x,
                       BlockActs& a) {
  Backend& be = ctx.be;
  // n1 [Tl, d] = rmsnorm(x) * w_in, on the residual stream's rows.
  Buffer n1(be, n.Tl * n.d, x.dtype);
  a.rstd1 = Buffer(be, n.Tl);
  be.rmsnorm_forward(v2(n1, n.Tl, n.d), a.rstd1.flat(), x, w[kInputNorm], ctx.cfg.norm_eps);
  // q [T, qw], k, v [T, kw] = n1 Wq^T, n1 Wk^T, n1 Wv^T; n1 enters the TP region once.
  Buffer k, v;
  const ColumnParallelLinear qkv(be, ctx.tp, {w[kQ], w[kK], w[kV]});
  a.n1 = qkv.forward(std::move(n1), {&a.q, &k, &v});
  const Tensor q = v2(a.q, n.T, n.qw);
  be.rope(q, n.H, ctx.pos.token_pos, ctx.cfg.rope_theta, false);
  be.rope(v2(k, n.T, n.kw), n.KV, ctx.pos.token_pos, ctx.cfg.rope_theta, false);
  // [B * Sk, kw]: every CP rank's keys and values.
  a.k = ctx.cp.gather_kv(be, std::move(k), n.B);
  a.v = ctx.cp.gather_kv(be, std::move(v), n.B);
  // attn [T, qw] = softmax(q k^T / sqrt(hd), causal by global position) v; lse [B, H, S].
  a.attn = Buffer(be, n.T * n.qw, q.dtype);
  a.lse = Buffer(be, n.B * n.H * n.S);
  be.attention_forward(v2(a.attn, n.T, n.qw), a.lse.flat(), q, v2(a.k, n.B * n.Sk, n.kw),
                       v2(a.v, n.B * n.Sk, n.kw), ctx.pos.seq_pos, ctx.pos.key_pos,
                       attention_shape(ctx));
  // h [Tl, d] = x + attn Wo^T, the partial sums reduced over TP.
  const RowParallelLinear o(be, ctx.tp, w[kO]);
  a.h = o.forward(v2(a.attn, n.T, n.qw), &x);
}

// dx [Tl, d] = dL/dx, given dh = dL/dh [Tl, d] (the MLP half's residual included).
void attention_backward(const BlockContext& ctx, const Dims& n, const Params& w, const Params& dw,
                        const Tensor& x, const Tensor& dh, Tensor dx, const BlockActs& a) {
  Backend& be = ctx.be;
  // dattn [T, qw] = dh Wo, dh on all T tokens; dWo += dh^T attn.
  const RowParallelLinear o(be, ctx.tp, w[kO], dw[kO]);
  const Buffer dattn = o.backward(dh, v2(a.attn, n.T, n.qw));
  // dq [T, qw]; dk, dv [B * Sk, kw] for every CP rank's keys, then summed back to their
  // owners [T, kw].
  const int64_t keys = n.B * n.Sk;
  const DType t = dattn.dtype();
  Buffer dq(be, n.T * n.qw, t), dk_all(be, keys * n.kw, t), dv_all(be, keys * n.kw, t);
  const Tensor dqv = v2(dq, n.T, n.qw);
  be.attention_backward(dqv, v2(dk_all, keys, n.kw), v2(dv_all, keys, n.kw), v2(dattn, n.T, n.qw),
                        v2(a.q, n.T, n.qw), v2(a.k, keys, n.kw), v2(a.v, keys, n.kw),
                        v2(a.attn, n.T, n.qw), a.lse.flat(), ctx.pos.seq_pos, ctx.pos.key_pos,
                        attention_shape(ctx));
  const Buffer dk = ctx.cp.scatter_kv_grad(be, std::move(dk_all), n.B);
  const Buffer dv = ctx.cp.scatter_kv_grad(be, std::move(dv_all), n.B);
  const Tensor dkv = v2(dk, n.T, n.kw);
  be.rope(dqv, n.H, ctx.pos.token_pos, ctx.cfg.rope_theta, true);
  be.rope(dkv, n.KV, ctx.pos.token_pos, ctx.cfg.rope_theta, true);
  // dn1 [Tl, d] = dq Wq + dk Wk + dv Wv, summed over TP; dW += dy^T n1 for each.
  const ColumnParallelLinear qkv(be, ctx.tp, {w[kQ], w[kK], w[kV]}, {dw[kQ], dw[kK], dw[kV]});
  const Buffer dn1 = qkv.backward(v2(a.n1, n.T, n.d), {dqv, dkv, v2(dv, n.T, n.kw)});
  // dx = rmsnorm'(dn1) + dh (the residual).
  be.rmsnorm_backward(dx, dw[kInputNorm], v2(dn1, n.Tl, n.d), x, w[kInputNorm], a.rstd1.flat());
  be.add(dx, dh);
}

// MLP half: out [Tl, d] = h + down(silu(gate(n2)) * up(n2)), h = a.h.
void mlp_forward(const BlockContext& ctx, const Dims& n, const Params& w, Tensor out,
                 BlockActs& a) {
  Backend& be = ctx.be;
  const Tensor h = v2(a.h, n.Tl, n.d);
  // n2 [Tl, d] = rmsnorm(h) * w_post.
  Buffer n2(be, n.Tl * n.d, h.dtype);
  a.rstd2 = Buffer(be, n.Tl);
  be.rmsnorm_forward(v2(n2, n.Tl, n.d), a.rstd2.flat(), h, w[kPostNorm], ctx.cfg.norm_eps);
  // gate, up [T, Fl] = n2 Wgate^T, n2 Wup^T; n2 enters the TP region once.
  const ColumnParallelLinear gate_up(be, ctx.tp, {w[kGate], w[kUp]});
  a.n2 = gate_up.forward(std::move(n2), {&a.gate, &a.up});
  // act [T, Fl] = silu(gate) * up.
  a.act = Buffer(be, n.T * n.F, a.gate.dtype());
  const Tensor act = v2(a.act, n.T, n.F);
  be.swiglu_forward(act, v2(a.gate, n.T, n.F), v2(a.up, n.T, n.F));
  // out = h + act Wdown^T, the partial sums reduced over TP.
  const RowParallelLinear down(be, ctx.tp, w[kDown]);
  down.forward_into(act, h, out);
}

// Returns dh [Tl, d] = dL/dh, given dout = dL/dout [Tl, d].
Buffer mlp_backward(const BlockContext& ctx, const Dims& n, const Params& w, const Params& dw,
                    const Tensor& dout, const BlockActs& a) {
  Backend& be = ctx.be;
  // dact [T, Fl] = dout Wdown, dout on all T tokens; dWdown += dout^T act.
  const RowParallelLinear down(be, ctx.tp, w[kDown], dw[kDown]);
  const Buffer dact = down.backward(dout, v2(a.act, n.T, n.F));
  // dgate, dup [T, Fl] through act = silu(gate) * up.
  Buffer dgate(be, n.T * n.F, dact.dtype()), dup(be, n.T * n.F, dact.dtype());
  be.swiglu_backward(v2(dgate, n.T, n.F), v2(dup, n.T, n.F), v2(dact, n.T, n.F),
                     v2(a.gate, n.T, n.F), v2(a.up, n.T, n.F));
  // dn2 [Tl, d] = dgate Wgate + dup Wup, summed over TP; dW += dy^T n2 for each.
  const ColumnParallelLinear gate_up(be, ctx.tp, {w[kGate], w[kUp]}, {dw[kGate], dw[kUp]});
  const Buffer dn2 = gate_up.backward(v2(a.n2, n.T, n.d), {v2(dgate, n.T, n.F), v2(dup, n.T, n.F)});
  // dh = rmsnorm'(dn2) + dout (the residual).
  Buffer dh(be, n.Tl * n.d, dout.dtype);
  const Tensor dhv = v2(dh, n.Tl, n.d);
  be.rmsnorm_backward(dhv, dw[kPostNorm], v2(dn2, n.Tl, n.d), v2(a.h, n.Tl, n.d), w[kPostNorm],
                      a.rstd2.flat());
  be.add(dhv, dout);
  return dh;
}

}  // namespace

void block_forward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                   const Tensor& x, Tensor out, BlockActs& a) {
  const Dims n(ctx);
  const Params w(u, w_flat);
  attention_forward(ctx, n, w, x, a);
  mlp_forward(ctx, n, w, out, a);
}

void block_backward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                    Tensor dw_flat, const Tensor& x, const Tensor& dout, Tensor dx,
                    const BlockActs& a) {
  const Dims n(ctx);
  const Params w(u, w_flat), dw(u, dw_flat);
  const Buffer dh = mlp_backward(ctx, n, w, dw, dout, a);
  attention_backward(ctx, n, w, dw, x, v2(dh, n.Tl, n.d), dx, a);
}

}  // namespace tetra
