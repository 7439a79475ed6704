#include "client/error_file.h"

#include <stdio.h>
#include <stdlib.h>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

TEST(ParseErrorFileTest, Parse_TorchRecordFormat_MessageTracebackTimestamp) {
  const char* text =
      R"({"message": {"message": "RuntimeError: boom \"x\" \u00e9",
      "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"t.py\"",
                    "timestamp": "1700000000"}}})";
  auto content = ParseErrorFile(text);
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(content->message, "RuntimeError: boom \"x\" \xc3\xa9");
  EXPECT_EQ(content->traceback, "Traceback (most recent call last):\n  File \"t.py\"");
  EXPECT_EQ(content->timestamp, "1700000000");
}

TEST(ParseErrorFileTest, Parse_MembersInAnyOrderWithExtras_Found) {
  auto content = ParseErrorFile(
      R"({"other": [1, {"a": null}, true], "message": {"extraInfo": {"x": 1.5e3},
          "errorCode": 3, "message": "ValueError: bad"}})");
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(content->message, "ValueError: bad");
  EXPECT_EQ(content->traceback, "");
}

TEST(ParseErrorFileTest, Parse_StringMessage_Accepted) {
  auto content = ParseErrorFile(R"({"message": "plain text"})");
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(content->message, "plain text");
}

TEST(ParseErrorFileTest, Parse_NotJson_KeepsTheText) {
  auto content = ParseErrorFile("  Segfault in foo()\n");
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(content->message, "Segfault in foo()");
}

TEST(ParseErrorFileTest, Parse_TruncatedOrDeepJson_NoCrashKeepsText) {
  auto truncated = ParseErrorFile(R"({"message": {"message": "abc)");
  ASSERT_TRUE(truncated.has_value());
  EXPECT_EQ(truncated->message, R"({"message": {"message": "abc)");
  std::string deep = "{\"message\": " + std::string(100000, '[');
  auto deep_content = ParseErrorFile(deep);
  ASSERT_TRUE(deep_content.has_value());
  EXPECT_LE(deep_content->message.size(), (16u << 10) + 3);
}

TEST(ParseErrorFileTest, Parse_Empty_Nullopt) {
  EXPECT_FALSE(ParseErrorFile("").has_value());
  EXPECT_FALSE(ParseErrorFile(" \n\t").has_value());
}

TEST(ParseErrorFileTest, Parse_LongMessage_CappedToLimit) {
  ErrorFileLimits limits;
  limits.max_field_chars = 10;
  auto content = ParseErrorFile(R"({"message": "0123456789abcdef"})", limits);
  ASSERT_TRUE(content.has_value());
  EXPECT_EQ(content->message, "0123456789...");
}

TEST(ParseErrorTimestampTest, WholeAndFractionalSeconds_Parsed) {
  auto whole = ParseErrorTimestamp("1700000000");
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->time, absl::FromUnixSeconds(1700000000));
  EXPECT_TRUE(whole->whole_seconds);
  auto fraction = ParseErrorTimestamp(" 1700000000.25\n");
  ASSERT_TRUE(fraction.has_value());
  EXPECT_EQ(fraction->time, absl::FromUnixMillis(1700000000250));
  EXPECT_FALSE(fraction->whole_seconds);
}

TEST(ParseErrorTimestampTest, EmptyJunkOrNotPositive_Nullopt) {
  EXPECT_FALSE(ParseErrorTimestamp("").has_value());
  EXPECT_FALSE(ParseErrorTimestamp("yesterday").has_value());
  EXPECT_FALSE(ParseErrorTimestamp("0").has_value());
  EXPECT_FALSE(ParseErrorTimestamp("-5.5").has_value());
  EXPECT_FALSE(ParseErrorTimestamp("nan").has_value());
  EXPECT_FALSE(ParseErrorTimestamp("1e300").has_value());
}

TEST(ReadErrorFileTest, Read_MissingFile_NotFound) {
  EXPECT_EQ(ReadErrorFile("/no/such/error.json").status().code(), absl::StatusCode::kNotFound);
}

TEST(ReadErrorFileTest, Read_RealFile_Parsed) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/error.json";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(R"({"message": {"message": "KeyError: 'lr'", "extraInfo": {}}})", f);
  fclose(f);
  auto content = ReadErrorFile(path);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(content->message, "KeyError: 'lr'");
}

}  // namespace
}  // namespace ddp::client
