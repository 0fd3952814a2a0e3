// --tensorboard's encoding (protocol-buffer fields, TFRecord framing and its masked CRC-32C)
// against bytes worked out by hand, the scalars a metrics record gives, and the step line's
// time left on a fake clock. (The event file a run writes: tests/e2e/test_tensorboard_run.cpp.)
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "../support/event_file.hpp"
#include "train/eta.hpp"
#include "train/tensorboard.hpp"

using namespace tetra;
using namespace tetra::tensorboard;
using tetra::test::bytes;
using tetra::test::records;

TEST_CASE("tensorboard: protocol-buffer fields, by hand") {
  CHECK(varint(0) == bytes({0}));
  CHECK(varint(1) == bytes({1}));
  CHECK(varint(300) == bytes({0xAC, 0x02}));  // 300 = 0b10_0101100
  CHECK(varint(uint64_t(1) << 63).size() == 10);
  CHECK(field_varint(2, 150) == bytes({0x10, 0x96, 0x01}));                    // key (2 << 3) | 0
  CHECK(field_bytes(1, "ab") == bytes({0x0A, 2, 'a', 'b'}));                   // key (1 << 3) | 2
  CHECK(field_float(2, 1.0f) == bytes({0x15, 0, 0, 0x80, 0x3F}));              // key (2 << 3) | 5
  CHECK(field_double(1, 1.0) == bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));  // (1 << 3) | 1
}

TEST_CASE("tensorboard: TFRecord framing and the masked CRC-32C") {
  // CRC-32C of "123456789" is 0xE3069283; masked: rotated right by 15, plus 0xa282ead8.
  const uint32_t crc = 0xE3069283u;
  CHECK(masked_crc("123456789") == ((crc >> 15 | crc << 17) + 0xa282ead8u));
  const std::string r = tfrecord("hello");
  REQUIRE(r.size() == 8 + 4 + 5 + 4);
  CHECK(r.substr(0, 8) == bytes({5, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(r.substr(12, 5) == "hello");
  CHECK(records(r) == std::vector<std::string>{"hello"});
}

TEST_CASE("tensorboard: events") {
  CHECK(session_start_event(0.0, 6) ==
        field_double(1, 0.0) + field_varint(2, 6) + bytes({0x3A, 2, 0x08, 1}));  // field 7
  // One Summary (field 5) of one Value: tag (1) and simple_value (2).
  const std::string loss = field_bytes(1, "loss") + field_float(2, 2.5f);
  CHECK(scalars_event(1.5, 3, {{"loss", 2.5}}) ==
        field_double(1, 1.5) + field_varint(2, 3) + field_bytes(5, field_bytes(1, loss)));
  const std::string text = text_event(0.0, 0, "config", "hi");
  CHECK(text.find(field_bytes(8, "hi")) != std::string::npos);    // string_val
  CHECK(text.find(field_bytes(1, "text")) != std::string::npos);  // plugin_name
  CHECK(text.find(field_varint(1, 7)) != std::string::npos);      // DT_STRING
}

TEST_CASE("tensorboard: every number of a metrics record is a scalar, nested names joined by /") {
  const json record = json::parse(
      R"({"step": 4, "loss": 2.5, "comm_bytes": {"pp": 1024, "tp": 0}, "compute_ms": [1.5, 2],
          "straggler": null, "val_loss": 3})");
  using Tags = std::vector<std::pair<std::string, double>>;
  CHECK(scalar_tags(record) == Tags{{"comm_bytes/pp", 1024},
                                    {"comm_bytes/tp", 0},
                                    {"compute_ms/0", 1.5},
                                    {"compute_ms/1", 2},
                                    {"loss", 2.5},
                                    {"val_loss", 3}});
}

TEST_CASE("eta: the mean of the recent intervals between step ends, once three are known") {
  Eta eta;
  eta.step_ended(100.0);  // step 0 ends after its warm-up: no interval yet
  CHECK(eta.seconds_left(10) < 0);
  eta.step_ended(102.0);
  eta.step_ended(104.0);
  CHECK(eta.seconds_left(10) < 0);  // two intervals
  eta.step_ended(106.0);
  CHECK(eta.seconds_left(10) == doctest::Approx(20.0));
  CHECK(eta.seconds_left(0) == 0);
  // Only the last kWindow intervals count: after them a new pace is all there is.
  for (int i = 1; i <= Eta::kWindow; ++i) eta.step_ended(106.0 + 5 * i);
  CHECK(eta.seconds_left(4) == doctest::Approx(20.0));
}

TEST_CASE("eta: durations in two units at most") {
  CHECK(short_duration(0) == "0s");
  CHECK(short_duration(59.4) == "59s");
  CHECK(short_duration(59.6) == "1m00s");
  CHECK(short_duration(185) == "3m05s");
  CHECK(short_duration(2 * 3600 + 7 * 60 + 20) == "2h07m");
  CHECK(short_duration(3 * 86400 + 4 * 3600 + 100) == "3d04h");
  CHECK(short_duration(-3) == "0s");
}
