// The attention mask hint against the positions it summarizes, the mask's tensors against the
// call's shape, and where q, k, v lie (backend/backend.hpp: AttnMask, AttnPositions,
// AttnLayout).
#include "backend/backend.hpp"

namespace tetra {

void check_attn_mask(const AttnShape& s, const int32_t* q_pos, const int32_t* k_pos) {
  if (s.mask == AttnMask::General) return;
  // Keys in sequence order, 0..Sk-1, under both hints.
  for (int64_t j = 0; j < s.sk; ++j)
    check(k_pos[j] == j, "attention mask hint: key ", j, " is at position ", k_pos[j],
          ", not in sequence order");
  if (s.mask == AttnMask::Causal) {
    check(s.sq == s.sk, "causal attention mask hint with ", s.sq, " queries and ", s.sk, " keys");
    for (int64_t i = 0; i < s.sq; ++i)
      check(q_pos[i] == i, "causal attention mask hint: query ", i, " is at position ", q_pos[i]);
    return;
  }
  // CpChunks: chunk g of the rank is global chunk c = cp_rank or 2 cp - 1 - cp_rank.
  const int64_t C = s.sq / 2;
  check(s.cp >= 1 && s.cp_rank >= 0 && s.cp_rank < s.cp && s.sq == 2 * C && s.sk == 2 * s.cp * C,
        "CP attention mask hint: cp ", s.cp, ", rank ", s.cp_rank, ", ", s.sq, " queries, ", s.sk,
        " keys");
  for (int64_t i = 0; i < s.sq; ++i) {
    const int64_t g = i / C, c = g == 0 ? s.cp_rank : 2 * s.cp - 1 - s.cp_rank;
    check(q_pos[i] == c * C + i % C, "CP attention mask hint (rank ", s.cp_rank, " of ", s.cp,
          "): query ", i, " is at position ", q_pos[i], ", not ", c * C + i % C);
  }
}

void check_attn_positions(const AttnShape& s, const AttnPositions& p) {
  const auto is = [](const Tensor& t, int64_t n) {
    return t.ptr != nullptr && t.dtype == DType::I32 && t.numel() == n;
  };
  check(is(p.q_pos, s.sq) && is(p.k_pos, s.sk), "attention positions ", p.q_pos.shape_str(), ", ",
        p.k_pos.shape_str(), " for ", s.sq, " queries and ", s.sk, " keys");
  if (s.documents)
    check(is(p.q_doc, s.batch * s.sq) && is(p.k_doc, s.batch * s.sk), "attention documents ",
          p.q_doc.shape_str(), ", ", p.k_doc.shape_str(), " for batch ", s.batch, ", ", s.sq,
          " queries and ", s.sk, " keys");
  else
    check(p.q_doc.ptr == nullptr && p.k_doc.ptr == nullptr,
          "attention documents given to a call whose shape has none");
}

AttnMaskView attn_mask_view(const AttnShape& s, const AttnPositions& p) {
  return {p.q_pos.i32(),
          p.k_pos.i32(),
          s.documents ? p.q_doc.i32() : nullptr,
          s.documents ? p.k_doc.i32() : nullptr,
          s.sq,
          s.sk};
}

AttnStrides attn_strides(const AttnShape& s) {
  const int64_t qw = int64_t(s.heads) * s.head_dim, kw = int64_t(s.kv_heads) * s.head_dim;
  switch (s.layout) {
    case AttnLayout::Packed:
      return {qw, kw, 0, 0, 0};
    case AttnLayout::Qkv:
      return {qw + 2 * kw, qw + 2 * kw, 0, qw, qw + kw};
    case AttnLayout::QInQkv:
      return {qw + 2 * kw, kw, 0, 0, 0};
  }
  fail("unknown attention layout");
}

void check_attn_qkv(const char* op, const AttnShape& s, const Tensor& q, const Tensor& k,
                    const Tensor& v) {
  const AttnStrides st = attn_strides(s);
  check(q.rows() == s.batch * s.sq && q.cols() == st.q && k.rows() == s.batch * s.sk &&
            k.cols() == st.kv && v.rows() == k.rows() && v.cols() == st.kv,
        op, ": q ", q.shape_str(), ", k ", k.shape_str(), ", v ", v.shape_str(), " for batch ",
        s.batch, ", ", s.sq, " queries, ", s.sk, " keys, heads ", s.heads, "/", s.kv_heads, " of ",
        s.head_dim);
  if (s.layout == AttnLayout::Qkv)
    check(s.sq == s.sk && q.ptr == k.ptr && q.ptr == v.ptr, op,
          ": the fused layout takes q, k and v as one tensor");
}

}  // namespace tetra
