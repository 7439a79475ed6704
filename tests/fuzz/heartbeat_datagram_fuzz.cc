// Heartbeat datagrams come from the network (coordinator --heartbeat-udp):
// any bytes. Decoding must not crash; what decodes re-encodes to the same
// bytes (states datagrams too); and any fields, encoded, decode back to
// themselves (and not as the other kind, nor with another key).

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/heartbeat/heartbeat_datagram.h"

namespace {

using ddp::heartbeat::DatagramFields;
using ddp::heartbeat::DatagramKind;

const std::string& Key(char fill) {
  static const std::string a(ddp::heartbeat::kKeySize, 'a');
  static const std::string b(ddp::heartbeat::kKeySize, 'b');
  return fill == 'a' ? a : b;
}

absl::string_view View(const ddp::heartbeat::Datagram& d) {
  return absl::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)ddp::heartbeat::PeekSession(bytes);
  for (DatagramKind kind : {DatagramKind::kHeartbeat, DatagramKind::kAck}) {
    auto decoded = ddp::heartbeat::DecodeDatagram(bytes, kind, Key('a'));
    if (decoded.ok() && View(ddp::heartbeat::EncodeDatagram(*decoded, Key('a'))) != bytes) {
      std::abort();
    }
  }
  static const ddp::heartbeat::DatagramKey prepared(Key('a'));
  auto states = ddp::heartbeat::DecodeStatesDatagram(bytes, prepared);
  if (states.ok()) {
    auto again = ddp::heartbeat::EncodeStatesDatagram(states->fields, states->stream_mark,
                                                      states->states, prepared);
    if (!again.has_value() || *again != bytes) std::abort();
  }
  if (size >= 25) {  // the input as fields
    DatagramFields fields;
    fields.kind = (data[0] & 1) != 0 ? DatagramKind::kAck : DatagramKind::kHeartbeat;
    fields.flag = (data[0] & 2) != 0;
    fields.states_taken = fields.kind == DatagramKind::kAck && (data[0] & 4) != 0;
    std::memcpy(&fields.session, data + 1, 8);
    std::memcpy(&fields.sequence, data + 9, 8);
    std::memcpy(&fields.generation, data + 17, 8);
    const ddp::heartbeat::Datagram d = ddp::heartbeat::EncodeDatagram(fields, Key('a'));
    auto back = ddp::heartbeat::DecodeDatagram(View(d), fields.kind, Key('a'));
    if (!back.ok() || back->flag != fields.flag || back->states_taken != fields.states_taken ||
        back->session != fields.session ||
        back->sequence != fields.sequence || back->generation != fields.generation) {
      std::abort();
    }
    const DatagramKind other =
        fields.kind == DatagramKind::kAck ? DatagramKind::kHeartbeat : DatagramKind::kAck;
    if (ddp::heartbeat::DecodeDatagram(View(d), other, Key('a')).ok() ||
        ddp::heartbeat::DecodeDatagram(View(d), fields.kind, Key('b')).ok()) {
      std::abort();
    }
    // The rest of the input as a states datagram's payload.
    fields.kind = DatagramKind::kStates;
    fields.states_taken = false;
    const absl::string_view payload = bytes.substr(25);
    auto encoded = ddp::heartbeat::EncodeStatesDatagram(fields, fields.sequence, payload, prepared);
    if (encoded.has_value() != (payload.size() <= ddp::heartbeat::kMaxStatesPayload)) std::abort();
    if (encoded.has_value()) {
      auto decoded = ddp::heartbeat::DecodeStatesDatagram(*encoded, prepared);
      if (!decoded.ok() || decoded->states != payload || decoded->stream_mark != fields.sequence ||
          decoded->fields.session != fields.session || decoded->fields.flag != fields.flag ||
          ddp::heartbeat::DecodeStatesDatagram(*encoded, ddp::heartbeat::DatagramKey(Key('b')))
              .ok()) {
        std::abort();
      }
    }
  }
  return 0;
}
