// --tensorboard DIR: a TensorBoard event file, written by rank 0. The format is small enough to
// write by hand: a file is a sequence of TFRecords (the length as 8 little-endian bytes, the
// masked CRC-32C of those 8 bytes, the record, the masked CRC-32C of the record), each record
// one `Event` protocol-buffer message. Of the messages only these fields are written (field
// numbers as TensorFlow's event.proto and summary.proto define them):
//   Event        { double wall_time = 1; int64 step = 2; string file_version = 3;
//                  Summary summary = 5; SessionLog session_log = 7; }
//   Summary      { repeated Value value = 1; }
//   Value        { string tag = 1; float simple_value = 2; TensorProto tensor = 8;
//                  SummaryMetadata metadata = 9; }
//   SummaryMetadata { PluginData plugin_data = 1; }   PluginData { string plugin_name = 1; }
//   TensorProto  { DataType dtype = 1 (DT_STRING = 7); TensorShapeProto tensor_shape = 2;
//                  repeated bytes string_val = 8; }
//   SessionLog   { SessionStatus status = 1 (START = 1); }
// Scalars are simple_value, a 32-bit float, as TensorBoard keeps them. The CRC is tetra's own
// (checkpoint/checksum.hpp), so no protobuf library is needed.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra {

// The scalars of a metrics record: every number in it but "step", named by its key, with the
// keys of nested objects and the indices of arrays joined by "/" ("comm_bytes/tp",
// "compute_ms/3"); nulls (a non-finite value, no straggler) are left out.
std::vector<std::pair<std::string, double>> scalar_tags(const json& record);

class TensorBoardWriter {
 public:
  // Creates DIR when missing (its parent must exist) and a new event file in it, named
  // events.out.tfevents.SECONDS.MICROSECONDS.HOST.PID so that the files of successive
  // attempts sort in the order they were written, as TensorBoard reads them. Throws
  // tetra::Error naming the flag when DIR is not a writable directory.
  explicit TensorBoardWriter(const std::string& dir);

  // One event at `step` holding a scalar per (tag, value).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // A text summary (TensorBoard's text plugin renders it as Markdown).
  void text(int64_t step, const std::string& tag, const std::string& markdown);
  // SessionLog START at `step`: a reader drops what earlier files hold at or after `step`
  // (the steps a restart lost and runs again).
  void session_start(int64_t step);

  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);

  std::string path_;
  OutputStream out_;
};

namespace tensorboard {

// Protocol-buffer encoding of the few wire types the messages above use.
std::string varint(uint64_t v);
std::string field_varint(int field, uint64_t v);
std::string field_double(int field, double v);
std::string field_float(int field, float v);
std::string field_bytes(int field, const std::string& bytes);  // strings and messages

// The CRC a TFRecord stores: CRC-32C rotated right by 15 bits, plus 0xa282ead8.
uint32_t masked_crc(const std::string& bytes);
// One TFRecord: length, its masked CRC, the record, its masked CRC.
std::string tfrecord(const std::string& record);

// Event messages, with the wall time in seconds since the epoch.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& values);
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text);
std::string session_start_event(double wall_time, int64_t step);

}  // namespace tensorboard
}  // namespace tetra
