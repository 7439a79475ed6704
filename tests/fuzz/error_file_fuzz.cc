// A worker's TORCHELASTIC_ERROR_FILE is written by user code: any bytes.
// Parsing must not crash, and every returned field stays within its cap.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "client/error_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ddp::client::ErrorFileLimits limits;
  limits.max_file_bytes = 4096;
  limits.max_field_chars = 256;
  auto content = ddp::client::ParseErrorFile(text, limits);
  if (content) {
    // Capped fields carry a 3-character "..." marker.
    if (content->message.size() > limits.max_field_chars + 3 ||
        content->traceback.size() > limits.max_field_chars + 3 ||
        content->timestamp.size() > 64 + 3) {
      std::abort();
    }
    (void)ddp::client::ParseErrorTimestamp(content->timestamp);
  }
  return 0;
}
