//===- Prediction.h - What Program::predict writes, sample by sample ------===//
//
// Not a public header. A prediction is a tensor of the inference graph (the
// loss's input, else the first output) whose dim 0 need not be the batch: a
// language model's logits are often [B*T, V]. These helpers find the tensor,
// the inputs it reads (the others, such as labels, the data may lack), and
// how its rows split into samples, so that predict() writes every row of
// every sample and never a batch's first rows only.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TOOLS_LIBAMPC_PREDICTION_H
#define AMPC_TOOLS_LIBAMPC_PREDICTION_H

#include <cstdint>
#include <string>
#include <vector>

namespace ampc {
class Graph;
class Value;
} // namespace ampc

namespace ampc::api {

/// The tensor a prediction is: the first operand of the last loss node (the
/// logits, or a regression's output), else the graph's first output;
/// nullptr when the graph has neither.
const ampc::Value *predictionValue(const ampc::Graph &g);

/// The graph inputs `v` is computed from, by name. The other inputs (a
/// loss's targets) are not needed to predict `v`.
std::vector<std::string> inputsReadBy(const ampc::Value &v);

/// How a prediction's rows belong to samples.
struct SampleLayout {
  /// Rows of dim 0 per sample: 1 for [B, C], T for [B*T, V].
  int64_t rowsPerSample = 1;
  /// One sample's shape: the dims after dim 0, with rowsPerSample in front
  /// when it is more than 1 ([C]; [T, V] for [B*T, V]).
  std::vector<int64_t> sampleShape;
  /// Elements of one sample.
  int64_t sampleElements() const;
};

/// Splits the prediction into samples, from the same model imported at two
/// batch sizes `b1` != `b2` (`at1`, `at2`: the graphs as imported, whose
/// values have the same names). Sample i must own rows [i k, (i + 1) k) of
/// the prediction's dim 0 for one k. That holds when every value the
/// prediction computes from the data along the way
///   - holds the batch in dim 0 alone, in whole blocks: dim 0 is batch x k
///     at both batch sizes and the other dims do not change;
///   - where a node combines several such values, has the k of each of them
///     (a concat along dim 0 would interleave samples);
///   - where a node turns one such value into another with a different k,
///     has its element count (a reshape: nothing repeated or dropped).
/// A transpose that moves the batch out of dim 0 (to flatten [T, B, V]
/// into [T*B, V]) breaks the first rule. Fails with `err` naming the first
/// value or node that breaks one.
bool sampleLayout(const ampc::Graph &at1, int64_t b1, const ampc::Graph &at2, int64_t b2,
                  SampleLayout &out, std::string &err);

/// The split of a model that builds at its own batch `b` only (an ONNX
/// export whose reshapes hold the batch it was traced with), so no second
/// batch size can show where the batch is: sample i owns rows [i k,
/// (i + 1) k) of dim 0, k = dim 0 / b, as for the models sampleLayout
/// accepts (and what a user slicing the outputs of such a model assumes).
/// Fails with `err` when dim 0 is not a multiple of the batch.
bool fixedBatchLayout(const ampc::Graph &g, int64_t b, SampleLayout &out, std::string &err);

} // namespace ampc::api

#endif
