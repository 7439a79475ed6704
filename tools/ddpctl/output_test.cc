#include "tools/ddpctl/output.h"

#include <string>

#include "gtest/gtest.h"

namespace ddp::ddpctl {
namespace {

TEST(IsValidUtf8, AcceptsTextRejectsBrokenSequences) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("gr\xC3\xBC\xC3\x9F"));  // "grüß"
  EXPECT_FALSE(IsValidUtf8("\xC3"));               // Truncated.
  EXPECT_FALSE(IsValidUtf8("\xC0\x80"));           // Overlong NUL.
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));       // Surrogate.
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(PrintableBytes, BinaryValue_IsEscapedAndQuoted) {
  EXPECT_EQ(PrintableBytes("abc"), "abc");
  EXPECT_EQ(PrintableBytes(std::string("a\0b", 3)), "\"a\\x00\\x62\"");
  EXPECT_EQ(PrintableBytes("\xFF"), "\"\\xff\"");
}

TEST(JsonObject, BytesField_TextOrBase64) {
  EXPECT_EQ(JsonObject().Bytes("v", "a\"b\n").Build(), R"({"v":"a\"b\n"})");
  EXPECT_EQ(JsonObject().Bytes("v", "\xFF\xFE").Int("n", -3).Build(),
            R"({"v_base64":"//4=","n":-3})");
}

TEST(KeyValueJson, AllFields_InOrder) {
  v1::KeyValue kv;
  kv.set_key("k");
  kv.set_value("v");
  kv.set_create_revision(2);
  kv.set_mod_revision(5);
  kv.set_version(3);
  kv.set_lease(9);
  EXPECT_EQ(KeyValueJson(kv),
            R"({"key":"k","value":"v","create_revision":2,"mod_revision":5,)"
            R"("version":3,"lease":9})");
  EXPECT_EQ(KeyValueText(kv), "k = v");
  EXPECT_EQ(KeyValueText(kv, false), "k");
}

TEST(EventText, PutAndDelete_ShowRevision) {
  v1::Event event;
  event.mutable_kv()->set_key("k");
  event.mutable_kv()->set_value("v");
  event.mutable_kv()->set_mod_revision(12);
  EXPECT_EQ(EventText(event), "PUT k = v (revision 12)");
  event.set_type(v1::Event::DELETE);
  EXPECT_EQ(EventText(event), "DELETE k (revision 12)");
  EXPECT_EQ(EventJson(event),
            R"({"type":"DELETE","kv":{"key":"k","create_revision":0,)"
            R"("mod_revision":12,"version":0,"lease":0}})");
}

}  // namespace
}  // namespace ddp::ddpctl
