//===- ApiPolicySummaryTest.cpp - The one-line policy summary -------------===//
#include "ampc/ampc.h"

#include <gtest/gtest.h>

using namespace ampc::api;

TEST(ApiPolicySummary, EachLevelInOneLine) {
  EXPECT_EQ(Policy::fromLevel("O0")->summary(), "O0: fp32 model");
  EXPECT_EQ(Policy::fromLevel("O1")->summary(), "O1: per-op bf16 casts, dynamic loss scale 65536");
  EXPECT_EQ(Policy::fromLevel("O2")->summary(),
            "O2: bf16 model, fp32 batchnorm, fp32 master weights, dynamic loss scale 65536");
  EXPECT_EQ(Policy::fromLevel("O3")->summary(), "O3: bf16 model");
}

TEST(ApiPolicySummary, OverridesAreNamedOnce) {
  Result<Policy> p = Policy::fromLevel("O2", {{"half_type", "f16"}, {"loss_scale", "128"}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->summary(), "O2: f16 model, fp32 batchnorm, fp32 master weights, static loss "
                          "scale 128.0 (overridden: half_type loss_scale)");
  Result<Policy> q = Policy::fromLevel("O2", {{"keep_batchnorm_fp32", "false"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->summary(), "O2: bf16 model, fp32 master weights, dynamic loss scale 65536 "
                          "(overridden: keep_batchnorm_fp32)");
}
