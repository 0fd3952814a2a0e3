// safetensors files: an 8-byte little-endian header length, a JSON header mapping each
// tensor name to {dtype, shape, data_offsets:[begin,end]} (offsets relative to the end of
// the header) plus an optional "__metadata__" object of string values, then the bytes.
//
// tetra writes F32 (weights, Adam state) and reads F32, BF16 and F16, converting to float.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tetra::st {

struct TensorInfo {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16", ... as written in the file
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
  int64_t numel() const;
};

class Reader {
 public:
  // Reads and validates the header. Throws tetra::Error naming the file for: a missing or
  // unreadable file (a FIFO or a device included), a header length past the end of the file,
  // malformed JSON, offsets outside the data section or not matching dtype*shape, and data
  // that the tensors do not tile exactly (overlaps, gaps, bytes after the last one), as the
  // reference implementation refuses.
  explicit Reader(const std::string& path);

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws if missing
  std::vector<std::string> names() const;                 // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Reads elements [offset, offset+count) of the flattened tensor as float. Throws
  // tetra::Error for an unsupported dtype (anything but F32, BF16, F16) or a bad range.
  void read(const std::string& name, int64_t offset, int64_t count, float* out) const;
  // The whole tensor.
  std::vector<float> read(const std::string& name) const;

 private:
  void check_tiling(const std::string& where, uint64_t data_size) const;

  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

class Writer {
 public:
  // Adds a tensor stored as F32, or as BF16 (rounded to nearest even); data is copied, so
  // the caller may free it.
  void add(const std::string& name, const std::vector<int64_t>& shape, const float* data,
           bool bf16 = false);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes a fresh temporary beside path, fsyncs it and renames it over path (replace_file),
  // so a reader never sees half a file.
  // Throws tetra::Error naming the path on any I/O failure.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, dtype;  // "F32" or "BF16"
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tetra::st
