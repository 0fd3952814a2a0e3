#include "train/tensorboard.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "checkpoint/checksum.hpp"
#include "util/error.hpp"

namespace tetra {
namespace tensorboard {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

std::string key(int field, WireType type) {
  return varint(uint64_t(field) << 3 | type);
}

std::string little_endian(uint64_t v, int bytes) {
  std::string s(bytes, '\0');
  for (int i = 0; i < bytes; ++i) s[i] = char((v >> (8 * i)) & 0xFF);
  return s;
}

// A Summary.Value's tag with what it holds.
std::string value(const std::string& tag, const std::string& contents) {
  return field_bytes(1, field_bytes(1, tag) + contents);
}

std::string event(double wall_time, int64_t step, const std::string& fields) {
  return field_double(1, wall_time) + field_varint(2, uint64_t(step)) + fields;
}

}  // namespace

std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += char((v & 0x7F) | 0x80);
  return s + char(v);
}

std::string field_varint(int field, uint64_t v) {
  return key(field, kVarint) + varint(v);
}

std::string field_double(int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return key(field, kFixed64) + little_endian(bits, 8);
}

std::string field_float(int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return key(field, kFixed32) + little_endian(bits, 4);
}

std::string field_bytes(int field, const std::string& bytes) {
  return key(field, kBytes) + varint(bytes.size()) + bytes;
}

uint32_t masked_crc(const std::string& bytes) {
  const uint32_t crc = ckpt::crc32c(bytes.data(), bytes.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& record) {
  const std::string length = little_endian(record.size(), 8);
  return length + little_endian(masked_crc(length), 4) + record +
         little_endian(masked_crc(record), 4);
}

std::string file_version_event(double wall_time) {
  return field_double(1, wall_time) + field_bytes(3, "brain.Event:2");
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) summary += value(tag, field_float(2, float(v)));
  return event(wall_time, step, field_bytes(5, summary));
}

std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text) {
  // A scalar string tensor: dtype DT_STRING (7), an empty shape, one string.
  const std::string tensor = field_varint(1, 7) + field_bytes(2, "") + field_bytes(8, text);
  const std::string metadata = field_bytes(1, field_bytes(1, "text"));
  return event(wall_time, step,
               field_bytes(5, value(tag, field_bytes(8, tensor) + field_bytes(9, metadata))));
}

std::string session_start_event(double wall_time, int64_t step) {
  return event(wall_time, step, field_bytes(7, field_varint(1, 1)));
}

}  // namespace tensorboard

namespace {

void add_scalars(const std::string& name, const json& v,
                 std::vector<std::pair<std::string, double>>& out) {
  if (v.is_number()) {
    out.emplace_back(name, v.get<double>());
  } else if (v.is_object()) {
    for (const auto& [key, child] : v.items()) add_scalars(name + "/" + key, child, out);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) add_scalars(name + "/" + std::to_string(i), v[i], out);
  }
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::vector<std::pair<std::string, double>> scalar_tags(const json& record) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [key, v] : record.items())
    if (key != "step") add_scalars(key, v, out);
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check(!fs::exists(dir, ec) || fs::is_directory(dir, ec), "cannot write `output.tensorboard` '",
        dir, "': it is not a directory");
  fs::create_directories(dir, ec);
  check(!ec, "cannot create `output.tensorboard` directory '", dir, "': ", ec.message());
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const long long us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  char name[400];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%06lld.%s.%d", us / 1000000,
                us % 1000000, host, int(::getpid()));
  path_ = (fs::path(dir) / name).string();
  // A name of its own (time, host, pid), made new: never an existing file, never a link.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  check(fd >= 0, "cannot write `output.tensorboard` file '", path_, "': ", std::strerror(errno));
  out_ = OutputStream(fd);
  write_event(tensorboard::file_version_event(wall_seconds()));
}

void TensorBoardWriter::scalars(int64_t step,
                                const std::vector<std::pair<std::string, double>>& values) {
  write_event(tensorboard::scalars_event(wall_seconds(), step, values));
}

void TensorBoardWriter::text(int64_t step, const std::string& tag, const std::string& markdown) {
  write_event(tensorboard::text_event(wall_seconds(), step, tag, markdown));
}

void TensorBoardWriter::session_start(int64_t step) {
  write_event(tensorboard::session_start_event(wall_seconds(), step));
}

// Each event is flushed whole: a run killed between steps leaves only complete records.
void TensorBoardWriter::write_event(const std::string& event) {
  const bool written = out_.write(tensorboard::tfrecord(event));  // errno before strerror
  check(written, "cannot write `output.tensorboard` file '", path_, "': ", std::strerror(errno));
}

}  // namespace tetra
