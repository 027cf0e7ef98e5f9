//===- OpFamilies.h - Fill the built-in rows, one family per file ----------===//
#ifndef AMPC_IR_OPS_OPFAMILIES_H
#define AMPC_IR_OPS_OPFAMILIES_H

namespace ampc {
class OpRegistry;

void registerLinearAlgebraOps(OpRegistry &r); // ops/LinearAlgebra.cpp
void registerNormalizationOps(OpRegistry &r); // ops/Normalization.cpp
void registerActivationOps(OpRegistry &r);    // ops/Activation.cpp
void registerElementwiseOps(OpRegistry &r);   // ops/Elementwise.cpp
void registerPoolingOps(OpRegistry &r);       // ops/Pooling.cpp
void registerSpatialOps(OpRegistry &r);       // ops/Spatial.cpp
void registerShapeOps(OpRegistry &r);         // ops/Shape.cpp
void registerLossOps(OpRegistry &r);          // ops/Loss.cpp
void registerReductionOps(OpRegistry &r);     // ops/Reduction.cpp
void registerOptimizerOps(OpRegistry &r);     // ops/Optimizer.cpp
void registerLossScaleOps(OpRegistry &r);     // ops/LossScale.cpp
void registerCollectiveOps(OpRegistry &r);    // ops/Collective.cpp
void registerLogicOps(OpRegistry &r);         // ops/Logic.cpp

inline void registerAllOpFamilies(OpRegistry &r) {
  registerLinearAlgebraOps(r);
  registerNormalizationOps(r);
  registerActivationOps(r);
  registerElementwiseOps(r);
  registerPoolingOps(r);
  registerSpatialOps(r);
  registerShapeOps(r);
  registerLossOps(r);
  registerReductionOps(r);
  registerOptimizerOps(r);
  registerLossScaleOps(r);
  registerCollectiveOps(r);
  registerLogicOps(r);
}

} // namespace ampc

#endif
