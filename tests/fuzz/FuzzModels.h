//===- FuzzModels.h - The fixed models the binary-format targets read against ===//
//
// Shared with ampc-fuzz-seeds (MakeSeeds.cpp), which writes the valid seed
// files from the same models, so a seed checkpoint matches the fuzz target's
// program and a seed data file fits its inputs. Data paths are relative to
// the fuzz harness's scratch directory.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_FUZZ_FUZZMODELS_H
#define AMPC_TESTS_FUZZ_FUZZMODELS_H

namespace ampc::fuzz {

/// Parameters of several ranks and batchnorm buffers, for the checkpoint reader.
constexpr const char *kCheckpointModel = R"(model: fuzz_checkpoint
batch: 2
inputs:
  image: {shape: [B, 1, 4, 4]}
  label: {shape: [B], dtype: i64}
layers:
  - conv2d: {out_channels: 2, kernel: 3, padding: 1}
  - batchnorm2d: {}
  - relu: {}
  - flatten: {}
  - linear: {out_features: 3, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {adam: {lr: 0.001}}
)";

/// One floating feature input and an integer class label.
constexpr const char *kCsvModel = R"(model: fuzz_csv
batch: 2
inputs:
  x: {shape: [B, 3]}
  y: {shape: [B], dtype: i64}
layers:
  - linear: {out_features: 4, name: logits}
loss: {cross_entropy: {input: logits, target: y}}
optimizer: {sgd: {lr: 0.1}}
train:
  drop_last: false
  data: {csv: {path: data.csv}}
)";

/// The same file read as a regression data set: a header line, the target
/// in column 0 (no integer input: the loss target takes the label column).
constexpr const char *kCsvRegressionModel = R"(model: fuzz_csv_regression
batch: 3
inputs:
  x: {shape: [B, 3]}
  t: {shape: [B, 1]}
layers:
  - linear: {out_features: 1, name: y}
loss: {mse_loss: {input: y, target: t}}
optimizer: {sgd: {lr: 0.1}}
train:
  data: {csv: {path: data.csv, header: true, label_column: 0}}
)";

/// A floating feature input and an integer class label, one .npy file each.
constexpr const char *kNpyModel = R"(model: fuzz_npy
batch: 2
inputs:
  x: {shape: [B, 3]}
  y: {shape: [B], dtype: i64}
layers:
  - linear: {out_features: 4, name: logits}
loss: {cross_entropy: {input: logits, target: y}}
optimizer: {sgd: {lr: 0.1}}
train:
  drop_last: false
  data: {npy: {x: x.npy, y: y.npy}}
)";

/// The same files read as token indices (an i32 input into an embedding of
/// 8 rows: the range check) and class labels.
constexpr const char *kNpyEmbeddingModel = R"(model: fuzz_npy_embedding
batch: 2
inputs:
  x: {shape: [B, 3], dtype: i32}
  y: {shape: [B], dtype: i64}
layers:
  - embedding: {num_embeddings: 8, embedding_dim: 2}
  - flatten: {}
  - linear: {out_features: 4, name: logits}
loss: {cross_entropy: {input: logits, target: y}}
optimizer: {sgd: {lr: 0.1}}
train:
  drop_last: false
  data: {npy: {x: x.npy, y: y.npy}}
)";

/// MNIST in miniature: 4x4 images and labels.
constexpr const char *kIdxModel = R"(model: fuzz_idx
batch: 2
inputs:
  image: {shape: [B, 1, 4, 4]}
  label: {shape: [B], dtype: i64}
layers:
  - flatten: {}
  - linear: {out_features: 10, name: logits}
loss: {cross_entropy: {input: logits, target: label}}
optimizer: {sgd: {lr: 0.1}}
train:
  drop_last: false
  data: {idx: {images: images.idx, labels: labels.idx}}
)";

} // namespace ampc::fuzz

#endif
