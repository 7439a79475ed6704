#include "coordinator/http/path_template.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::http {
namespace {

using Vars = std::vector<std::pair<std::string, std::string>>;
using ::testing::ElementsAre;
using ::testing::Pair;

PathTemplate Parse(const char* pattern) {
  auto t = PathTemplate::Parse(pattern);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

TEST(PathTemplateTest, LiteralPathMatchesOnlyItself) {
  PathTemplate t = Parse("/v1/jobs");
  Vars vars;
  EXPECT_TRUE(t.Match("/v1/jobs", &vars));
  EXPECT_TRUE(vars.empty());
  EXPECT_FALSE(t.Match("/v1/jobs/x", &vars));
  EXPECT_FALSE(t.Match("/v1/job", &vars));
  EXPECT_FALSE(t.Match("v1/jobs", &vars));
}

TEST(PathTemplateTest, VariableTakesOneDecodedSegment) {
  PathTemplate t = Parse("/v1/jobs/{job_id}");
  Vars vars;
  ASSERT_TRUE(t.Match("/v1/jobs/train%2D1", &vars));
  EXPECT_THAT(vars, ElementsAre(Pair("job_id", "train-1")));
  EXPECT_FALSE(t.Match("/v1/jobs/", &vars)) << "an empty segment is not an id";
  EXPECT_FALSE(t.Match("/v1/jobs/a/b", &vars));
}

TEST(PathTemplateTest, VerbMustBePresentAndIsStripped) {
  PathTemplate t = Parse("/v1/jobs/{job_id}:cancel");
  Vars vars;
  ASSERT_TRUE(t.Match("/v1/jobs/j1:cancel", &vars));
  EXPECT_THAT(vars, ElementsAre(Pair("job_id", "j1")));
  EXPECT_FALSE(t.Match("/v1/jobs/j1", &vars));
  EXPECT_FALSE(t.Match("/v1/jobs/j1:watch", &vars));
}

TEST(PathTemplateTest, RestVariableTakesSlashesAndEncodedColons) {
  PathTemplate t = Parse("/v1/kv/{namespace}/{key=**}:add");
  Vars vars;
  ASSERT_TRUE(t.Match("/v1/kv/ns/a/b%3Ac:add", &vars));
  EXPECT_THAT(vars, ElementsAre(Pair("namespace", "ns"), Pair("key", "a/b:c")));
  PathTemplate get = Parse("/v1/kv/{namespace}/{key=**}");
  ASSERT_TRUE(get.Match("/v1/kv/ns/x%20y", &vars));
  EXPECT_THAT(vars, ElementsAre(Pair("namespace", "ns"), Pair("key", "x y")));
  EXPECT_FALSE(get.Match("/v1/kv/ns", &vars));
}

TEST(PathTemplateTest, MalformedTemplatesAreRefusedWithTheReason) {
  EXPECT_FALSE(PathTemplate::Parse("v1/jobs").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1//jobs").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1/{a").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1/x{a}").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1/{a=*}").ok());
  auto rest_not_last = PathTemplate::Parse("/v1/{a=**}/b");
  ASSERT_FALSE(rest_not_last.ok());
  EXPECT_THAT(std::string(rest_not_last.status().message()), ::testing::HasSubstr("last"));
}

TEST(PercentDecodeTest, DecodesAndRejectsMalformedEscapes) {
  EXPECT_EQ(*PercentDecode("a%2Fb%20c+d"), "a/b c+d");
  EXPECT_FALSE(PercentDecode("50%").ok());
  EXPECT_FALSE(PercentDecode("%4").ok());
  EXPECT_FALSE(PercentDecode("%zz").ok());
}

}  // namespace
}  // namespace ddp::http
