#include "checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "util/bf16.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra::st {

// Tensor bytes are copied straight between files and float arrays.
static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; tetra needs a little-endian host");

namespace {

// The reference implementation refuses larger headers too; it stops a corrupt length from
// making us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Bytes per element; 0 for a dtype we cannot size (it is still listed, just never read).
uint64_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"F64", 8},     {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1},
      {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4}, {"I16", 2},  {"I8", 1},
      {"U64", 8},     {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float mag = std::ldexp(float(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// numel, or nullopt for a negative dimension or a count that overflows int64.
std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// A non-negative integer from the header, or nullopt for anything else.
std::optional<int64_t> index_value(const json& v) {
  const std::optional<int64_t> i = json_int(v);
  return i && *i >= 0 ? i : std::nullopt;
}

// Closes the descriptor on every path out of a function.
struct File {
  int fd = -1;
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

void open_for_reading(File& f, const std::string& path) {
  // Never a FIFO or a device (util/input_file): their open or read would not end.
  InputFile in = open_input_file(path);
  if (in.problem == kNotFound) fail("safetensors file '", path, "': not found");
  check(in.fd >= 0, "safetensors file '", path, "': cannot open: ", in.problem);
  f.fd = std::exchange(in.fd, -1);
}

void read_at(const File& f, void* buf, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(f.fd, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    check(r >= 0, "safetensors file '", path, "': read failed: ", std::strerror(errno));
    // The header was checked against the size at open, so the file shrank since.
    check(r > 0, "safetensors file '", path, "': unexpected end of file at byte ", offset,
          " (truncated while in use?)");
    p += r;
    n -= uint64_t(r);
    offset += uint64_t(r);
  }
}

// Validates one header entry; `where` names the file and tensor for error messages.
TensorInfo parse_entry(const std::string& where, const std::string& name, const json& v,
                       uint64_t data_size) {
  check(v.is_object(), where, ": expected an object with dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    check(v.contains(key), where, ": missing \"", key, "\"");
  }
  TensorInfo t;
  t.name = name;
  check(v.at("dtype").is_string(), where, ": \"dtype\" is not a string");
  t.dtype = v.at("dtype").get<std::string>();

  const json& shape = v.at("shape");
  check(shape.is_array(), where, ": \"shape\" is not an array");
  for (const json& d : shape) {
    const auto dim = index_value(d);
    check(dim.has_value(), where, ": shape ", shape.dump(), " has a dimension that is not a ",
          "non-negative integer");
    t.shape.push_back(*dim);
  }
  const auto numel = checked_numel(t.shape);
  check(numel.has_value(), where, ": shape ", shape_text(t.shape), " has too many elements");

  const json& offsets = v.at("data_offsets");
  const bool pair = offsets.is_array() && offsets.size() == 2;
  const auto begin = pair ? index_value(offsets.at(0)) : std::nullopt;
  const auto end = pair ? index_value(offsets.at(1)) : std::nullopt;
  check(begin && end, where, ": data_offsets ", offsets.dump(),
        " is not a pair of non-negative integers");
  t.begin = uint64_t(*begin);
  t.end = uint64_t(*end);
  check(t.begin <= t.end, where, ": data_offsets [", t.begin, ", ", t.end, "] end before begin");
  check(t.end <= data_size, where, ": data_offsets [", t.begin, ", ", t.end,
        "] run past the end of the data section (", data_size, " bytes; truncated file?)");

  if (const uint64_t esize = dtype_size(t.dtype)) {
    uint64_t bytes = 0;
    const bool fits = !__builtin_mul_overflow(uint64_t(*numel), esize, &bytes);
    check(fits && bytes == t.end - t.begin, where, ": dtype ", t.dtype, " with shape ",
          shape_text(t.shape), " needs ", fits ? std::to_string(bytes) : "too many",
          " bytes but data_offsets [", t.begin, ", ", t.end, "] hold ", t.end - t.begin);
  }
  return t;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Reader::Reader(const std::string& path) : path_(path) {
  const std::string where = "safetensors file '" + path + "'";
  File f;
  open_for_reading(f, path);
  struct stat st {};
  check(::fstat(f.fd, &st) == 0, where, ": cannot stat: ", std::strerror(errno));
  check(S_ISREG(st.st_mode), where, ": not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  check(size >= 8, where, ": ", size, " bytes is too short for the 8-byte header length");

  uint8_t len[8];
  read_at(f, len, 8, 0, path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  check(n <= size - 8, where, ": header length ", n, " runs past the end of the file (", size,
        " bytes)");
  check(n <= kMaxHeaderBytes, where, ": header length ", n, " exceeds the limit of ",
        kMaxHeaderBytes, " bytes");
  std::string text(n, '\0');
  read_at(f, text.data(), n, 8, path);

  json header;
  const std::string problem = parse_json(text, header);
  check(problem.empty(), where, ": header is not valid: ", problem);
  check(header.is_object(), where, ": header is not a JSON object");
  data_start_ = 8 + n;
  for (const auto& [name, v] : header.items()) {
    if (name != "__metadata__") {
      tensors_[name] = parse_entry(where + ": tensor '" + name + "'", name, v, size - data_start_);
      continue;
    }
    check(v.is_object(), where, ": __metadata__ is not an object");
    for (const auto& [key, value] : v.items()) {
      check(value.is_string(), where, ": __metadata__ value of '", key, "' is not a string");
      metadata_[key] = value.get<std::string>();
    }
  }
  check_tiling(where, size - data_start_);
}

void Reader::check_tiling(const std::string& where, uint64_t data_size) const {
  // As the reference implementation validates: taken in the order of their offsets, each
  // tensor begins where the one before ends (the first at 0) and the last ends at the end of
  // the file, so no byte is two tensors' (an overlap would alias them) and none is no one's.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, t] : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t next = 0;
  for (const TensorInfo* t : by_offset) {
    check(t->begin == next, where, ": tensor '", t->name, "' has data_offsets [", t->begin, ", ",
          t->end, "], but the tensors before it end at ", next,
          t->begin < next ? " (they overlap)" : " (a gap)");
    next = t->end;
  }
  check(next == data_size, where, ": its tensors end at byte ", next, " of a data section of ",
        data_size, " bytes");
}

bool Reader::has(const std::string& name) const {
  return tensors_.count(name) > 0;
}

const TensorInfo& Reader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  check(it != tensors_.end(), "safetensors file '", path_, "': no tensor named '", name, "'");
  return it->second;
}

std::vector<std::string> Reader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

void Reader::read(const std::string& name, int64_t offset, int64_t count, float* out) const {
  const TensorInfo& t = info(name);
  const bool f32 = t.dtype == "F32", bf16 = t.dtype == "BF16", f16 = t.dtype == "F16";
  check(f32 || bf16 || f16, "safetensors file '", path_, "': tensor '", name, "' has dtype ",
        t.dtype, "; supported: F32, BF16, F16");
  const int64_t n = t.numel();
  check(offset >= 0 && count >= 0 && count <= n && offset <= n - count, "safetensors file '", path_,
        "': cannot read elements [", offset, ", ", offset + count, ") of tensor '", name, "' with ",
        n, " elements");
  if (count == 0) return;

  // Reopened per call: the Reader stays copyable and holds no descriptor between reads.
  File f;
  open_for_reading(f, path_);
  const uint64_t esize = f32 ? 4 : 2;
  const uint64_t at = data_start_ + t.begin + uint64_t(offset) * esize;
  if (f32) {
    read_at(f, out, uint64_t(count) * 4, at, path_);
    return;
  }
  // Half-precision data goes through a bounded buffer, not a copy of the whole range.
  constexpr int64_t kChunk = 1 << 16;
  std::vector<uint16_t> buf(size_t(std::min(count, kChunk)));
  for (int64_t done = 0; done < count;) {
    const int64_t m = std::min(count - done, kChunk);
    read_at(f, buf.data(), uint64_t(m) * 2, at + uint64_t(done) * 2, path_);
    for (int64_t i = 0; i < m; ++i) {
      out[done + i] = bf16 ? bf16_to_float(buf[size_t(i)]) : f16_to_float(buf[size_t(i)]);
    }
    done += m;
  }
}

std::vector<float> Reader::read(const std::string& name) const {
  std::vector<float> out(size_t(info(name).numel()));
  read(name, 0, int64_t(out.size()), out.data());
  return out;
}

void Writer::add(const std::string& name, const std::vector<int64_t>& shape, const float* data,
                 bool bf16) {
  check(name != "__metadata__", "safetensors writer: '__metadata__' cannot name a tensor");
  const bool dup =
      std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
  check(!dup, "safetensors writer: tensor '", name, "' added twice");
  const auto numel = checked_numel(shape);
  check(numel.has_value(), "safetensors writer: tensor '", name, "' has invalid shape ",
        shape_text(shape));
  check(data != nullptr || *numel == 0, "safetensors writer: tensor '", name, "' has no data");
  Entry e{name, bf16 ? "BF16" : "F32", shape, {}};
  if (bf16) {
    std::vector<uint16_t> low(static_cast<size_t>(*numel));
    for (size_t i = 0; i < low.size(); ++i) low[i] = float_to_bf16(data[i]);
    e.bytes.resize(low.size() * 2);
    std::memcpy(e.bytes.data(), low.data(), e.bytes.size());
  } else {
    e.bytes.resize(size_t(*numel) * 4);
    if (*numel > 0) std::memcpy(e.bytes.data(), data, e.bytes.size());
  }
  entries_.push_back(std::move(e));
}

void Writer::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void Writer::write(const std::string& path) const {
  // Tensors are stored back to back in the order added, as the format requires no gaps.
  json header = json::object();
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    const uint64_t bytes = e.bytes.size();
    json& t = header[e.name];
    t["dtype"] = e.dtype;
    t["shape"] = e.shape;
    t["data_offsets"] = json::array({offset, offset + bytes});
    offset += bytes;
  }
  for (const auto& [key, value] : metadata_) header["__metadata__"][key] = value;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // spaces are JSON whitespace
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  const std::string problem = replace_file(path, [&](int fd) {
    bool ok = write_all(fd, len, 8) && write_all(fd, text.data(), text.size());
    for (const Entry& e : entries_) ok = ok && write_all(fd, e.bytes.data(), e.bytes.size());
    return ok;
  });
  check(problem.empty(), "cannot write safetensors file '", path, "': ", problem);
}

}  // namespace tetra::st
