// The block as two halves, each one's forward next to its backward. Shapes as in block.hpp;
// every TP collective happens inside a layer of parallel/tp.hpp. Activations and their
// gradients take the dtype of the block's input (bf16 under --dtype bf16); 1/rms and the
// log-sum-exp stay fp32.
#include "transformer/block.hpp"

#include <tuple>
#include <utility>

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

struct BlockDims {
  int64_t T, Tl, d, hd, S, Sk, B, F;
  int H, KV;       // heads on this TP rank
  int64_t qw, kw;  // widths of q [T, H*hd] and of k, v [T, KV*hd]
  explicit BlockDims(const BlockContext& ctx) {
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

// Decoding: this forward's keys and values k, v [T, kw] become the cache's rows [length,
// length + T); returns views of all its rows so far [Sk, kw], which the key positions cover.
std::pair<Tensor, Tensor> append_to_cache(const BlockContext& ctx, const BlockDims& dims,
                                          const Buffer& k, const Buffer& v) {
  KvCache& c = *ctx.cache;
  check(ctx.tp.size() == 1 && ctx.cp.size() == 1 && dims.B == 1,
        "the KV cache decodes one sequence at TP = CP = 1");
  const int64_t capacity = c.k.numel() / dims.kw;
  check(c.length + dims.T == dims.Sk && dims.Sk <= capacity, "KV cache: ", c.length, " cached and ",
        dims.T, " new positions, ", dims.Sk, " key positions, room for ", capacity);
  const Tensor all_k = c.k.view({capacity, dims.kw}), all_v = c.v.view({capacity, dims.kw});
  ctx.be.copy(all_k.rows_view(c.length, dims.T), k.view({dims.T, dims.kw}));
  ctx.be.copy(all_v.rows_view(c.length, dims.T), v.view({dims.T, dims.kw}));
  c.length += dims.T;
  return {all_k.rows_view(0, c.length), all_v.rows_view(0, c.length)};
}

// Attention half: a.h [Tl, d] = x + o(attention(rope(q(xn)), rope(k(xn)), v(xn))).
void attention_forward(const BlockContext& ctx, const BlockDims& dims, const Params& w,
                       const Tensor& x, BlockActs& a) {
  Backend& be = ctx.be;
  // xn [Tl, d] = rmsnorm(x) * w_in, on the residual stream's rows.
  Buffer xn(be, dims.Tl * dims.d, x.dtype);
  a.x_rstd = Buffer(be, dims.Tl);
  be.rmsnorm_forward(xn.view({dims.Tl, dims.d}), a.x_rstd.flat(), x, w[kInputNorm],
                     ctx.cfg.norm_eps);
  // q [T, qw], k, v [T, kw] = xn Wq^T, xn Wk^T, xn Wv^T; xn enters the TP region once.
  Buffer k, v;
  const ColumnParallelLinear qkv(be, ctx.tp, {w[kQ], w[kK], w[kV]});
  a.xn = qkv.forward(std::move(xn), {&a.q, &k, &v});
  const Tensor q = a.q.view({dims.T, dims.qw});
  be.rope(q, dims.H, ctx.pos.token_pos, ctx.cfg.rope_theta, false);
  be.rope(k.view({dims.T, dims.kw}), dims.KV, ctx.pos.token_pos, ctx.cfg.rope_theta, false);
  // keys, values [B * Sk, kw]: every CP rank's, or when decoding the cached positions' and
  // then these tokens'.
  Tensor keys, values;
  if (ctx.cache != nullptr) {
    std::tie(keys, values) = append_to_cache(ctx, dims, k, v);
  } else {
    a.k = ctx.cp.gather_kv(be, std::move(k), dims.B);
    a.v = ctx.cp.gather_kv(be, std::move(v), dims.B);
    keys = a.k.view({dims.B * dims.Sk, dims.kw});
    values = a.v.view({dims.B * dims.Sk, dims.kw});
  }
  // attn [T, qw] = softmax(q k^T / sqrt(hd), causal by global position) v; lse [B, H, S].
  a.attn = Buffer(be, dims.T * dims.qw, q.dtype);
  a.lse = Buffer(be, dims.B * dims.H * dims.S);
  be.attention_forward(a.attn.view({dims.T, dims.qw}), a.lse.flat(), q, keys, values,
                       ctx.pos.seq_pos, ctx.pos.key_pos, attention_shape(ctx));
  // h [Tl, d] = x + attn Wo^T, the partial sums reduced over TP.
  const RowParallelLinear o(be, ctx.tp, w[kO]);
  a.h = o.forward(a.attn.view({dims.T, dims.qw}), &x);
}

// dx [Tl, d] = dL/dx, given dh = dL/dh [Tl, d] (the MLP half's residual included).
void attention_backward(const BlockContext& ctx, const BlockDims& dims, const Params& w,
                        const Params& dw, const Tensor& x, const Tensor& dh, Tensor dx,
                        const BlockActs& a) {
  Backend& be = ctx.be;
  // dattn [T, qw] = dh Wo, dh on all T tokens; dWo += dh^T attn.
  const RowParallelLinear o(be, ctx.tp, w[kO], dw[kO]);
  const Buffer dattn = o.backward(dh, a.attn.view({dims.T, dims.qw}));
  // dq [T, qw]; dk, dv [B * Sk, kw] for every CP rank's keys, then summed back to their
  // owners [T, kw].
  const int64_t keys = dims.B * dims.Sk;
  const DType t = dattn.dtype();
  Buffer dq(be, dims.T * dims.qw, t), dk_all(be, keys * dims.kw, t), dv_all(be, keys * dims.kw, t);
  const Tensor dqv = dq.view({dims.T, dims.qw});
  be.attention_backward(dqv, dk_all.view({keys, dims.kw}), dv_all.view({keys, dims.kw}),
                        dattn.view({dims.T, dims.qw}), a.q.view({dims.T, dims.qw}),
                        a.k.view({keys, dims.kw}), a.v.view({keys, dims.kw}),
                        a.attn.view({dims.T, dims.qw}), a.lse.flat(), ctx.pos.seq_pos,
                        ctx.pos.key_pos, attention_shape(ctx));
  const Buffer dk = ctx.cp.scatter_kv_grad(be, std::move(dk_all), dims.B);
  const Buffer dv = ctx.cp.scatter_kv_grad(be, std::move(dv_all), dims.B);
  const Tensor dkv = dk.view({dims.T, dims.kw});
  be.rope(dqv, dims.H, ctx.pos.token_pos, ctx.cfg.rope_theta, true);
  be.rope(dkv, dims.KV, ctx.pos.token_pos, ctx.cfg.rope_theta, true);
  // dxn [Tl, d] = dq Wq + dk Wk + dv Wv, summed over TP; dW += dy^T xn for each.
  const ColumnParallelLinear qkv(be, ctx.tp, {w[kQ], w[kK], w[kV]}, {dw[kQ], dw[kK], dw[kV]});
  const Buffer dxn =
      qkv.backward({dqv, dkv, dv.view({dims.T, dims.kw})}, a.xn.view({dims.T, dims.d}));
  // dx = rmsnorm'(dxn) + dh (the residual).
  be.rmsnorm_backward(dx, dw[kInputNorm], dxn.view({dims.Tl, dims.d}), x, w[kInputNorm],
                      a.x_rstd.flat());
  be.add(dx, dh);
}

// MLP half: out [Tl, d] = h + down(silu(gate(hn)) * up(hn)), h = a.h.
void mlp_forward(const BlockContext& ctx, const BlockDims& dims, const Params& w, Tensor out,
                 BlockActs& a) {
  Backend& be = ctx.be;
  const Tensor h = a.h.view({dims.Tl, dims.d});
  // hn [Tl, d] = rmsnorm(h) * w_post.
  Buffer hn(be, dims.Tl * dims.d, h.dtype);
  a.h_rstd = Buffer(be, dims.Tl);
  be.rmsnorm_forward(hn.view({dims.Tl, dims.d}), a.h_rstd.flat(), h, w[kPostNorm],
                     ctx.cfg.norm_eps);
  // gate, up [T, Fl] = hn Wgate^T, hn Wup^T; hn enters the TP region once.
  const ColumnParallelLinear gate_up(be, ctx.tp, {w[kGate], w[kUp]});
  a.hn = gate_up.forward(std::move(hn), {&a.gate, &a.up});
  // act [T, Fl] = silu(gate) * up.
  a.act = Buffer(be, dims.T * dims.F, a.gate.dtype());
  const Tensor act = a.act.view({dims.T, dims.F});
  be.swiglu_forward(act, a.gate.view({dims.T, dims.F}), a.up.view({dims.T, dims.F}));
  // out = h + act Wdown^T, the partial sums reduced over TP.
  const RowParallelLinear down(be, ctx.tp, w[kDown]);
  down.forward_into(act, h, out);
}

// Returns dh [Tl, d] = dL/dh, given dout = dL/dout [Tl, d].
Buffer mlp_backward(const BlockContext& ctx, const BlockDims& dims, const Params& w,
                    const Params& dw, const Tensor& dout, const BlockActs& a) {
  Backend& be = ctx.be;
  // dact [T, Fl] = dout Wdown, dout on all T tokens; dWdown += dout^T act.
  const RowParallelLinear down(be, ctx.tp, w[kDown], dw[kDown]);
  const Buffer dact = down.backward(dout, a.act.view({dims.T, dims.F}));
  // dgate, dup [T, Fl] through act = silu(gate) * up.
  Buffer dgate(be, dims.T * dims.F, dact.dtype()), dup(be, dims.T * dims.F, dact.dtype());
  be.swiglu_backward(dgate.view({dims.T, dims.F}), dup.view({dims.T, dims.F}),
                     dact.view({dims.T, dims.F}), a.gate.view({dims.T, dims.F}),
                     a.up.view({dims.T, dims.F}));
  // dhn [Tl, d] = dgate Wgate + dup Wup, summed over TP; dW += dy^T hn for each.
  const ColumnParallelLinear gate_up(be, ctx.tp, {w[kGate], w[kUp]}, {dw[kGate], dw[kUp]});
  const Buffer dhn = gate_up.backward({dgate.view({dims.T, dims.F}), dup.view({dims.T, dims.F})},
                                      a.hn.view({dims.T, dims.d}));
  // dh = rmsnorm'(dhn) + dout (the residual).
  Buffer dh(be, dims.Tl * dims.d, dout.dtype);
  const Tensor dhv = dh.view({dims.Tl, dims.d});
  be.rmsnorm_backward(dhv, dw[kPostNorm], dhn.view({dims.Tl, dims.d}), a.h.view({dims.Tl, dims.d}),
                      w[kPostNorm], a.h_rstd.flat());
  be.add(dhv, dout);
  return dh;
}

}  // namespace

void block_forward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                   const Tensor& x, Tensor out, BlockActs& a) {
  const BlockDims dims(ctx);
  const Params w(u, w_flat);
  attention_forward(ctx, dims, w, x, a);
  mlp_forward(ctx, dims, w, out, a);
}

void block_backward(const BlockContext& ctx, const UnitLayout& u, const Tensor& w_flat,
                    Tensor dw_flat, const Tensor& x, const Tensor& dout, Tensor dx,
                    const BlockActs& a) {
  const BlockDims dims(ctx);
  const Params w(u, w_flat), dw(u, dw_flat);
  const Buffer dh = mlp_backward(ctx, dims, w, dw, dout, a);
  attention_backward(ctx, dims, w, dw, x, dh.view({dims.Tl, dims.d}), dx, a);
}

}  // namespace tetra
