// The block as two halves, each one's forward next to its backward. Shapes as in block.hpp;
// every TP collective happens inside a layer of parallel/tp.hpp. Activations and their
// gradients take the dtype of the block's input (bf16 under --dtype bf16); 1/rms and the
// log-sum-exp stay fp32.
#include "transformer/block.hpp"

#include <tuple>
#include <utility>

#include "backend/fusions.hpp"

namespace tetra {

Tensor param_view(const Tensor& flat, const ParamInfo& p) {
  Tensor t = flat.flat(p.offset, p.numel());
  return p.local_shape.size() == 2 ? t.reshape({p.local_shape[0], p.local_shape[1]}) : t;
}

AttnPositions attn_positions(const BlockContext& ctx) {
  return {ctx.pos.seq_pos, ctx.pos.key_pos, ctx.pos.token_doc, ctx.pos.key_doc};
}

AttnShape attention_shape(const BlockContext& ctx) {
  const int tp = ctx.tp.size();
  const int64_t S = ctx.pos.seq, Sk = ctx.pos.key_pos.numel();
  AttnShape a{ctx.pos.batch, S, Sk, ctx.cfg.heads / tp, ctx.cfg.kv_heads / tp, ctx.cfg.head_dim()};
  // The mask hint (backend/backend.hpp): CP's chunks against the sequence's keys, or causal
  // when queries and keys are the same tokens; the CPU checks it against the positions.
  if (ctx.cp.size() > 1)
    a.mask = AttnMask::CpChunks, a.cp = ctx.cp.size(), a.cp_rank = ctx.cp.comm.rank();
  else if (S == Sk)
    a.mask = AttnMask::Causal;
  a.documents = ctx.pos.token_doc.ptr != nullptr;
  // RoPE in place: q (and at CP 1 k and v) read from the projection's qkv; CP's gathered keys
  // and decoding's cached ones are packed.
  if (fused(Fusion::RopeInPlace))
    a.layout = ctx.cp.size() == 1 && ctx.cache == nullptr ? AttnLayout::Qkv : AttnLayout::QInQkv;
  return a;
}

namespace {

struct BlockDims {
  int64_t T, Tl, d, hd, S, Sk, B, F;
  int H, KV;       // heads on this TP rank
  int64_t qw, kw;  // widths of q [T, H*hd] and of k, v [T, KV*hd]
  int64_t qkvw;    // width of the fused projection's output qkv [T, qw + 2 kw]
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
    qkvw = qw + 2 * kw;
  }
};

// Parameters first..last of a unit stacked by rows, [sum of rows, in]: one view of the flat
// buffer, since make_units lays them out one after another with the same columns.
Tensor stacked_view(const Tensor& flat, const UnitSpec& u, int first, int last) {
  const ParamInfo& p0 = u.params[first];
  const int64_t in = p0.local_shape[1];
  int64_t rows = 0;
  for (int i = first; i <= last; ++i) {
    const ParamInfo& p = u.params[i];
    check(p.local_shape.size() == 2 && p.local_shape[1] == in && p.offset == p0.offset + rows * in,
          p.name, " does not follow ", p0.name, " in its unit");
    rows += p.local_shape[0];
  }
  return flat.flat(p0.offset, rows * in).reshape({rows, in});
}

// The block's parameters (or their gradients) as views of its flat unit buffer, and the
// fused projections' weights: qkv = [Wq; Wk; Wv] [qw + 2 kw, d], gate_up = [Wgate; Wup]
// [2 Fl, d].
struct Params {
  Tensor t[kBlockParams];
  Tensor qkv, gate_up;
  Params(const UnitSpec& u, const Tensor& flat)
      : qkv(stacked_view(flat, u, kQ, kV)), gate_up(stacked_view(flat, u, kGate, kUp)) {
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

// dx = rmsnorm'(dy) + residual, the residual stream's gradient: in the norm's pass (the
// norm_residual fusion), or the norm's backward, then an add.
void rmsnorm_backward_plus(Backend& be, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                           const Tensor& w, const Tensor& rstd, const Tensor& residual) {
  if (fused(Fusion::NormResidual))
    return be.rmsnorm_backward_residual(dx, dw, dy, x, w, rstd, residual);
  be.rmsnorm_backward(dx, dw, dy, x, w, rstd);
  be.add(dx, residual);
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
  // qkv [T, qw + 2 kw] = xn [Wq; Wk; Wv]^T, one GEMM; xn enters the TP region once. Then
  // q [T, qw] = rope(q part), k [T, kw] = rope(k part), v [T, kw] = v part; or under RoPE in
  // place (backend/fusions.hpp) qkv rotated in place and kept as a.q [T, qkvw], which attention
  // reads q from (and at CP 1 k and v), with packed k, v copied out of it for the gather or
  // the cache.
  Buffer qkv;
  const ColumnParallelLinear qkv_proj(be, ctx.tp, w.qkv);
  a.xn = qkv_proj.forward(std::move(xn), qkv);
  const DType t = qkv.dtype();
  const AttnShape shape = attention_shape(ctx);
  Buffer k, v;
  if (shape.layout != AttnLayout::Qkv)
    k = Buffer(be, dims.T * dims.kw, t), v = Buffer(be, dims.T * dims.kw, t);
  if (shape.layout == AttnLayout::Packed) {
    a.q = Buffer(be, dims.T * dims.qw, t);
    be.rope_split_qkv(a.q.view({dims.T, dims.qw}), k.view({dims.T, dims.kw}),
                      v.view({dims.T, dims.kw}), qkv.view({dims.T, dims.qkvw}), dims.H, dims.KV,
                      ctx.pos.token_pos, ctx.cfg.rope());
    qkv.reset();
  } else {
    a.q = std::move(qkv);
    const Tensor rotated = a.q.view({dims.T, dims.qkvw});
    be.rope_qkv(rotated, dims.H, dims.KV, ctx.pos.token_pos, ctx.cfg.rope(), false);
    if (shape.layout == AttnLayout::QInQkv) {
      be.copy_columns(k.view({dims.T, dims.kw}), 0, rotated, dims.qw, dims.kw);
      be.copy_columns(v.view({dims.T, dims.kw}), 0, rotated, dims.qw + dims.kw, dims.kw);
    }
  }
  const Tensor q = a.q.view({dims.T, shape.layout == AttnLayout::Packed ? dims.qw : dims.qkvw});
  // keys, values [B * Sk, kw]: every CP rank's, or when decoding the cached positions' and
  // then these tokens'; under AttnLayout::Qkv, q's tensor itself.
  Tensor keys = q, values = q;
  if (ctx.cache != nullptr) {
    std::tie(keys, values) = append_to_cache(ctx, dims, k, v);
  } else if (shape.layout != AttnLayout::Qkv) {
    a.k = ctx.cp.gather_kv(be, std::move(k), dims.B);
    a.v = ctx.cp.gather_kv(be, std::move(v), dims.B);
    keys = a.k.view({dims.B * dims.Sk, dims.kw});
    values = a.v.view({dims.B * dims.Sk, dims.kw});
  }
  // attn [T, qw] = softmax(q k^T / sqrt(hd), causal by global position and within documents
  // under --doc-mask) v; lse [B, H, S].
  a.attn = Buffer(be, dims.T * dims.qw, t);
  a.lse = Buffer(be, dims.B * dims.H * dims.S);
  be.attention_forward(a.attn.view({dims.T, dims.qw}), a.lse.flat(), q, keys, values,
                       attn_positions(ctx), shape);
  // h [Tl, d] = x + attn Wo^T, the partial sums reduced over TP.
  const RowParallelLinear o(be, ctx.tp, w[kO]);
  a.h = o.forward(a.attn.view({dims.T, dims.qw}), &x);
}

// dqkv [T, qw + 2 kw] = (rope^-1(dq) | rope^-1(dk) | dv), the fused projection's gradient,
// given dattn [T, qw] (freed once attention's backward has read it). dq [T, qw]; dk, dv
// [B * Sk, kw] for every CP rank's keys, then summed back to their owners [T, kw].
Buffer qkv_grad_split(const BlockContext& ctx, const BlockDims& dims, const BlockActs& a,
                      Buffer dattn, const AttnShape& shape) {
  Backend& be = ctx.be;
  const int64_t keys = dims.B * dims.Sk;
  const DType t = dattn.dtype();
  Buffer dq(be, dims.T * dims.qw, t), dk_all(be, keys * dims.kw, t), dv_all(be, keys * dims.kw, t);
  const Tensor dqv = dq.view({dims.T, dims.qw});
  be.attention_backward(dqv, dk_all.view({keys, dims.kw}), dv_all.view({keys, dims.kw}),
                        dattn.view({dims.T, dims.qw}), a.q.view({dims.T, dims.qw}),
                        a.k.view({keys, dims.kw}), a.v.view({keys, dims.kw}),
                        a.attn.view({dims.T, dims.qw}), a.lse.flat(), attn_positions(ctx), shape);
  dattn.reset();
  Buffer dk = ctx.cp.scatter_kv_grad(be, std::move(dk_all), dims.B);
  Buffer dv = ctx.cp.scatter_kv_grad(be, std::move(dv_all), dims.B);
  Buffer dqkv(be, dims.T * dims.qkvw, t);
  be.rope_merge_qkv(dqkv.view({dims.T, dims.qkvw}), dqv, dk.view({dims.T, dims.kw}),
                    dv.view({dims.T, dims.kw}), dims.H, dims.KV, ctx.pos.token_pos, ctx.cfg.rope());
  return dqkv;
}

// The same under RoPE in place: attention writes dq (at CP 1 dk and dv too) straight into
// dqkv's columns; at CP > 1 dk, dv come back from their owners into theirs; then dqkv is
// rotated back in place.
Buffer qkv_grad_in_place(const BlockContext& ctx, const BlockDims& dims, const BlockActs& a,
                         Buffer dattn, const AttnShape& shape) {
  Backend& be = ctx.be;
  const int64_t keys = dims.B * dims.Sk;
  const DType t = dattn.dtype();
  Buffer dqkv(be, dims.T * dims.qkvw, t);
  const Tensor dqkvv = dqkv.view({dims.T, dims.qkvw}), qkv = a.q.view({dims.T, dims.qkvw});
  const Tensor dattnv = dattn.view({dims.T, dims.qw}), attn = a.attn.view({dims.T, dims.qw});
  if (shape.layout == AttnLayout::Qkv) {
    be.attention_backward(dqkvv, dqkvv, dqkvv, dattnv, qkv, qkv, qkv, attn, a.lse.flat(),
                          attn_positions(ctx), shape);
    dattn.reset();
  } else {
    Buffer dk_all(be, keys * dims.kw, t), dv_all(be, keys * dims.kw, t);
    be.attention_backward(dqkvv, dk_all.view({keys, dims.kw}), dv_all.view({keys, dims.kw}), dattnv,
                          qkv, a.k.view({keys, dims.kw}), a.v.view({keys, dims.kw}), attn,
                          a.lse.flat(), attn_positions(ctx), shape);
    dattn.reset();
    const Buffer dk = ctx.cp.scatter_kv_grad(be, std::move(dk_all), dims.B);
    const Buffer dv = ctx.cp.scatter_kv_grad(be, std::move(dv_all), dims.B);
    be.copy_columns(dqkvv, dims.qw, dk.view({dims.T, dims.kw}), 0, dims.kw);
    be.copy_columns(dqkvv, dims.qw + dims.kw, dv.view({dims.T, dims.kw}), 0, dims.kw);
  }
  be.rope_qkv(dqkvv, dims.H, dims.KV, ctx.pos.token_pos, ctx.cfg.rope(), true);
  return dqkv;
}

// B of the attention half: dx [Tl, d] = dL/dx given dh = dL/dh [Tl, d] (the MLP half's
// residual included); dw_in [d] += the input norm's weight gradient. g keeps dh (gathered
// under --sp) and dqkv for W.
void attention_backward_input(const BlockContext& ctx, const BlockDims& dims, const Params& w,
                              Tensor dw_in, const Tensor& x, Buffer dh_in, Tensor dx,
                              const BlockActs& a, BlockGrads& g) {
  Backend& be = ctx.be;
  const Tensor dh = dh_in.view({dims.Tl, dims.d});
  // dattn [T, qw] = dh Wo, dh on all T tokens.
  const RowParallelLinear o(be, ctx.tp, w[kO]);
  Buffer dh_gathered;
  const Tensor dh_full = o.gather_output_grad(dh, dh_gathered);
  Buffer dattn = o.backward_input(dh_full);
  const AttnShape shape = attention_shape(ctx);
  g.dqkv = shape.layout == AttnLayout::Packed
               ? qkv_grad_split(ctx, dims, a, std::move(dattn), shape)
               : qkv_grad_in_place(ctx, dims, a, std::move(dattn), shape);
  // dxn [Tl, d] = dqkv [Wq; Wk; Wv], summed over TP: one GEMM.
  const ColumnParallelLinear qkv_proj(be, ctx.tp, w.qkv);
  const Buffer dxn = qkv_proj.backward_input(g.dqkv.view({dims.T, dims.qkvw}));
  // dx = rmsnorm'(dxn) + dh (the residual); dw_in += the norm's weight gradient.
  rmsnorm_backward_plus(be, dx, dw_in, dxn.view({dims.Tl, dims.d}), x, w[kInputNorm],
                        a.x_rstd.flat(), dh);
  g.dh = g.gathered && !dh_gathered.empty() ? std::move(dh_gathered) : std::move(dh_in);
}

// A Row layer's output gradient on all T tokens [T, d], for its weight gradient: as B kept it,
// or gathered again from the local rows [Tl, d] into `storage`.
Tensor row_output_grad(const RowParallelLinear& l, const BlockDims& dims, const BlockGrads& g,
                       const Buffer& grad, Buffer& storage) {
  if (g.gathered) return grad.view({dims.T, dims.d});
  return l.gather_output_grad(grad.view({dims.Tl, dims.d}), storage);
}

// W of the attention half: dWo += dh^T attn; d[Wq; Wk; Wv] += dqkv^T xn.
void attention_backward_weight(const BlockContext& ctx, const BlockDims& dims, const Params& dw,
                               const BlockActs& a, const BlockGrads& g, bool dw_fresh) {
  Backend& be = ctx.be;
  const RowParallelLinear o(be, ctx.tp, Tensor{}, dw[kO], dw_fresh);
  Buffer dh_gathered;
  o.backward_weight(row_output_grad(o, dims, g, g.dh, dh_gathered), a.attn.view({dims.T, dims.qw}));
  dh_gathered.reset();
  const ColumnParallelLinear qkv_proj(be, ctx.tp, Tensor{}, dw.qkv, dw_fresh);
  qkv_proj.backward_weight(g.dqkv.view({dims.T, dims.qkvw}), a.xn.view({dims.T, dims.d}));
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
  // gate_up [T, 2 Fl] = hn [Wgate; Wup]^T, one GEMM; hn enters the TP region once.
  const ColumnParallelLinear gate_up(be, ctx.tp, w.gate_up);
  a.hn = gate_up.forward(std::move(hn), a.gate_up);
  // act [T, Fl] = silu(gate) * up.
  a.act = Buffer(be, dims.T * dims.F, a.gate_up.dtype());
  const Tensor act = a.act.view({dims.T, dims.F});
  be.swiglu_fused_forward(act, a.gate_up.view({dims.T, 2 * dims.F}));
  // out = h + act Wdown^T, the partial sums reduced over TP.
  const RowParallelLinear down(be, ctx.tp, w[kDown]);
  down.forward_into(act, h, out);
}

// B of the MLP half: returns dh [Tl, d] = dL/dh, given dout = dL/dout [Tl, d]; dw_post [d] +=
// the post-attention norm's weight gradient. g keeps dout (gathered under --sp) and dgate_up
// for W.
Buffer mlp_backward_input(const BlockContext& ctx, const BlockDims& dims, const Params& w,
                          Tensor dw_post, Buffer dout_in, const BlockActs& a, BlockGrads& g) {
  Backend& be = ctx.be;
  const Tensor dout = dout_in.view({dims.Tl, dims.d});
  // dact [T, Fl] = dout Wdown, dout on all T tokens.
  const RowParallelLinear down(be, ctx.tp, w[kDown]);
  Buffer dout_gathered;
  const Buffer dact = down.backward_input(down.gather_output_grad(dout, dout_gathered));
  // dgate_up [T, 2 Fl] = (dgate | dup) through act = silu(gate) * up.
  g.dgate_up = Buffer(be, dims.T * 2 * dims.F, dact.dtype());
  const Tensor dgu = g.dgate_up.view({dims.T, 2 * dims.F});
  be.swiglu_fused_backward(dgu, dact.view({dims.T, dims.F}), a.gate_up.view({dims.T, 2 * dims.F}));
  // dhn [Tl, d] = dgate_up [Wgate; Wup], summed over TP: one GEMM.
  const ColumnParallelLinear gate_up(be, ctx.tp, w.gate_up);
  const Buffer dhn = gate_up.backward_input(dgu);
  // dh = rmsnorm'(dhn) + dout (the residual); dw_post += the norm's weight gradient.
  Buffer dh(be, dims.Tl * dims.d, dout.dtype);
  rmsnorm_backward_plus(be, dh.view({dims.Tl, dims.d}), dw_post, dhn.view({dims.Tl, dims.d}),
                        a.h.view({dims.Tl, dims.d}), w[kPostNorm], a.h_rstd.flat(), dout);
  g.dout = g.gathered && !dout_gathered.empty() ? std::move(dout_gathered) : std::move(dout_in);
  return dh;
}

// W of the MLP half: dWdown += dout^T act; d[Wgate; Wup] += dgate_up^T hn.
void mlp_backward_weight(const BlockContext& ctx, const BlockDims& dims, const Params& dw,
                         const BlockActs& a, const BlockGrads& g, bool dw_fresh) {
  Backend& be = ctx.be;
  const RowParallelLinear down(be, ctx.tp, Tensor{}, dw[kDown], dw_fresh);
  Buffer dout_gathered;
  down.backward_weight(row_output_grad(down, dims, g, g.dout, dout_gathered),
                       a.act.view({dims.T, dims.F}));
  dout_gathered.reset();
  const ColumnParallelLinear gate_up(be, ctx.tp, Tensor{}, dw.gate_up, dw_fresh);
  gate_up.backward_weight(g.dgate_up.view({dims.T, 2 * dims.F}), a.hn.view({dims.T, dims.d}));
}

}  // namespace

void block_forward(const BlockContext& ctx, const UnitSpec& u, const Tensor& w_flat,
                   const Tensor& x, Tensor out, BlockActs& a) {
  const BlockDims dims(ctx);
  const Params w(u, w_flat);
  attention_forward(ctx, dims, w, x, a);
  mlp_forward(ctx, dims, w, out, a);
}

void block_backward_input(const BlockContext& ctx, const UnitSpec& u, const Tensor& w_flat,
                          Tensor dnorm, const Tensor& x, Buffer dout, Tensor dx, const BlockActs& a,
                          BlockGrads& g, bool weights_apart) {
  const BlockDims dims(ctx);
  const Params w(u, w_flat);
  g.gathered = !weights_apart || dims.Tl == dims.T;
  Buffer dh = mlp_backward_input(ctx, dims, w, dnorm.flat(dims.d, dims.d), std::move(dout), a, g);
  attention_backward_input(ctx, dims, w, dnorm.flat(0, dims.d), x, std::move(dh), dx, a, g);
}

void block_backward_weight(const BlockContext& ctx, const UnitSpec& u, Tensor dw_flat,
                           const Tensor& dnorm, const BlockActs& a, const BlockGrads& g,
                           bool dw_fresh) {
  const BlockDims dims(ctx);
  const Params dw(u, dw_flat);
  mlp_backward_weight(ctx, dims, dw, a, g, dw_fresh);
  attention_backward_weight(ctx, dims, dw, a, g, dw_fresh);
  ctx.be.copy(dw[kInputNorm], dnorm.flat(0, dims.d));
  ctx.be.copy(dw[kPostNorm], dnorm.flat(dims.d, dims.d));
}

}  // namespace tetra
