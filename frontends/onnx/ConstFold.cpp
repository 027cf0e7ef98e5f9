//===- ConstFold.cpp - Tensor arithmetic on constants known at import ------===//
#include "frontends/onnx/ConstFold.h"

#include "ir/HalfConversion.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>

namespace ampc::onnxfe {

namespace {

/// Row-major strides.
llvm::SmallVector<int64_t, 6> stridesOf(llvm::ArrayRef<int64_t> dims) {
  llvm::SmallVector<int64_t, 6> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * dims[d];
  return strides;
}

/// Calls f(flat, index) for every multi-index of dims, in row-major order.
template <class F> void forEachIndex(llvm::ArrayRef<int64_t> dims, F &&f) {
  int64_t total = 1;
  for (int64_t d : dims)
    total *= d;
  llvm::SmallVector<int64_t, 6> index(dims.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    f(flat, llvm::ArrayRef<int64_t>(index));
    for (size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < dims[d])
        break;
      index[d] = 0;
    }
  }
}

bool tooLarge(llvm::ArrayRef<int64_t> dims, std::string &err) {
  if (foldedCount(dims) >= 0)
    return false;
  err = "folding this op would make a constant of more than " + std::to_string(kMaxFoldedElements) +
        " elements";
  return true;
}

ConstTensor shaped(DType dtype, llvm::ArrayRef<int64_t> dims) {
  ConstTensor out;
  out.dtype = dtype;
  out.dims.assign(dims.begin(), dims.end());
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  out.values.assign(size_t(n), 0.0);
  return out;
}

} // namespace

int64_t foldedCount(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && p > kMaxFoldedElements / d))
      return -1;
    p *= d;
  }
  return p;
}

bool broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes,
                     llvm::SmallVectorImpl<int64_t> &out, std::string &err) {
  size_t rank = 0;
  for (llvm::ArrayRef<int64_t> s : shapes)
    rank = std::max(rank, s.size());
  out.assign(rank, 1);
  for (llvm::ArrayRef<int64_t> s : shapes)
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t &o = out[rank - s.size() + d];
      if (s[d] == o || s[d] == 1)
        continue;
      if (o != 1) {
        err = "operands of shapes that do not broadcast";
        return false;
      }
      o = s[d];
    }
  return true;
}

bool foldElementwise(llvm::ArrayRef<const ConstTensor *> operands, DType dtype,
                     llvm::function_ref<double(llvm::ArrayRef<double>)> fn, ConstTensor &out,
                     std::string &err) {
  llvm::SmallVector<llvm::ArrayRef<int64_t>, 3> shapes;
  for (const ConstTensor *c : operands)
    shapes.push_back(c->dims);
  llvm::SmallVector<int64_t, 6> dims;
  if (!broadcastShapes(shapes, dims, err) || tooLarge(dims, err))
    return false;
  // Each operand's stride along each result dim: 0 where it broadcasts.
  size_t rank = dims.size();
  llvm::SmallVector<llvm::SmallVector<int64_t, 6>, 3> strides;
  for (const ConstTensor *c : operands) {
    llvm::SmallVector<int64_t, 6> own = stridesOf(c->dims), s(rank, 0);
    for (size_t d = 0; d < c->dims.size(); ++d)
      if (c->dims[d] != 1)
        s[rank - c->dims.size() + d] = own[d];
    strides.push_back(s);
  }
  out = shaped(dtype, dims);
  llvm::SmallVector<double, 3> args(operands.size());
  forEachIndex(dims, [&](int64_t flat, llvm::ArrayRef<int64_t> index) {
    for (size_t k = 0; k < operands.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d)
        off += index[d] * strides[k][d];
      args[k] = operands[k]->values[size_t(off)];
    }
    out.values[size_t(flat)] = fn(args);
  });
  return true;
}

bool foldExpand(const ConstTensor &c, llvm::ArrayRef<int64_t> dims, ConstTensor &out,
                std::string &err) {
  ConstTensor target;
  target.dims.assign(dims.begin(), dims.end());
  if (tooLarge(dims, err))
    return false;
  target.values.assign(size_t(foldedCount(dims)), 0.0);
  return foldElementwise(
      {&c, &target}, c.dtype, [](llvm::ArrayRef<double> a) { return a[0]; }, out, err);
}

ConstTensor foldTranspose(const ConstTensor &c, llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t, 6> dims;
  for (int64_t p : perm)
    dims.push_back(c.dims[size_t(p)]);
  llvm::SmallVector<int64_t, 6> inStrides = stridesOf(c.dims);
  ConstTensor out = shaped(c.dtype, dims);
  forEachIndex(dims, [&](int64_t flat, llvm::ArrayRef<int64_t> index) {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      off += index[d] * inStrides[size_t(perm[d])];
    out.values[size_t(flat)] = c.values[size_t(off)];
  });
  return out;
}

ConstTensor foldSlice(const ConstTensor &c, llvm::ArrayRef<SliceAxis> axes) {
  size_t rank = c.dims.size();
  llvm::SmallVector<int64_t, 6> start(rank, 0), step(rank, 1), dims(c.dims.begin(), c.dims.end());
  for (const SliceAxis &a : axes) {
    start[a.axis] = a.start;
    step[a.axis] = a.step;
    dims[a.axis] = a.count;
  }
  llvm::SmallVector<int64_t, 6> inStrides = stridesOf(c.dims);
  ConstTensor out = shaped(c.dtype, dims);
  forEachIndex(dims, [&](int64_t flat, llvm::ArrayRef<int64_t> index) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (start[d] + index[d] * step[d]) * inStrides[d];
    out.values[size_t(flat)] = c.values[size_t(off)];
  });
  return out;
}

bool foldGather(const ConstTensor &data, const ConstTensor &indices, unsigned axis,
                ConstTensor &out, std::string &err) {
  llvm::SmallVector<int64_t, 6> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.append(indices.dims.begin(), indices.dims.end());
  dims.append(data.dims.begin() + axis + 1, data.dims.end());
  if (tooLarge(dims, err))
    return false;
  int64_t size = data.dims[axis];
  int64_t outer = 1, inner = 1;
  for (unsigned d = 0; d < axis; ++d)
    outer *= data.dims[d];
  for (size_t d = axis + 1; d < data.dims.size(); ++d)
    inner *= data.dims[d];
  out = shaped(data.dtype, dims);
  size_t k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (double iv : indices.values) {
      int64_t i = saturatingInt(iv);
      if (i < 0)
        i += size;
      if (i < 0 || i >= size) {
        err = "index " + std::to_string(saturatingInt(iv)) + " is out of range for a dim of size " +
              std::to_string(size);
        return false;
      }
      for (int64_t e = 0; e < inner; ++e)
        out.values[k++] = data.values[size_t((o * size + i) * inner + e)];
    }
  return true;
}

bool foldConcat(llvm::ArrayRef<const ConstTensor *> parts, unsigned axis, ConstTensor &out,
                std::string &err) {
  const ConstTensor &first = *parts.front();
  llvm::SmallVector<int64_t, 6> dims(first.dims.begin(), first.dims.end());
  dims[axis] = 0;
  for (const ConstTensor *p : parts) {
    for (size_t d = 0; d < dims.size(); ++d)
      if (p->dims.size() != dims.size() || (d != axis && p->dims[d] != first.dims[d])) {
        err = "inputs whose dims other than the axis differ";
        return false;
      }
    dims[axis] += p->dims[axis];
  }
  if (tooLarge(dims, err))
    return false;
  int64_t outer = 1;
  for (unsigned d = 0; d < axis; ++d)
    outer *= dims[d];
  out = shaped(first.dtype, dims);
  size_t k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstTensor *p : parts) {
      size_t block = p->values.size() / size_t(std::max<int64_t>(outer, 1));
      for (size_t e = 0; e < block; ++e)
        out.values[k++] = p->values[size_t(o) * block + e];
    }
  return true;
}

bool foldTile(const ConstTensor &c, llvm::ArrayRef<int64_t> repeats, ConstTensor &out,
              std::string &err) {
  if (repeats.size() != c.dims.size()) {
    err = "repeats must have one value per dim";
    return false;
  }
  llvm::SmallVector<int64_t, 6> dims;
  for (size_t d = 0; d < c.dims.size(); ++d) {
    if (repeats[d] < 0) {
      err = "repeats must not be negative";
      return false;
    }
    dims.push_back(c.dims[d] * repeats[d]);
  }
  if (tooLarge(dims, err))
    return false;
  llvm::SmallVector<int64_t, 6> inStrides = stridesOf(c.dims);
  out = shaped(c.dtype, dims);
  forEachIndex(dims, [&](int64_t flat, llvm::ArrayRef<int64_t> index) {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      off += (index[d] % c.dims[d]) * inStrides[d];
    out.values[size_t(flat)] = c.values[size_t(off)];
  });
  return true;
}

ConstTensor foldTrilu(const ConstTensor &c, int64_t k, bool upper) {
  ConstTensor out = c;
  size_t rank = c.dims.size();
  int64_t rows = c.dims[rank - 2], cols = c.dims[rank - 1];
  for (size_t i = 0; i < out.values.size(); ++i) {
    int64_t col = int64_t(i) % cols, row = (int64_t(i) / cols) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    if (!keep)
      out.values[i] = 0;
  }
  return out;
}

ConstTensor foldCumSum(const ConstTensor &c, unsigned axis, bool exclusive, bool reverse) {
  ConstTensor out = c;
  int64_t size = c.dims[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < c.dims.size(); ++d)
    inner *= c.dims[d];
  for (unsigned d = 0; d < axis; ++d)
    outer *= c.dims[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t e = 0; e < inner; ++e) {
      double sum = 0;
      for (int64_t step = 0; step < size; ++step) {
        int64_t i = reverse ? size - 1 - step : step;
        size_t at = size_t((o * size + i) * inner + e);
        double x = c.values[at];
        if (exclusive) {
          out.values[at] = sum;
          sum += x;
        } else {
          sum += x;
          out.values[at] = sum;
        }
      }
    }
  return out;
}

bool foldScatterNd(const ConstTensor &data, const ConstTensor &indices, const ConstTensor &updates,
                   llvm::StringRef reduction, ConstTensor &out, std::string &err) {
  if (indices.dims.empty()) {
    err = "indices must have at least one dim";
    return false;
  }
  size_t depth = size_t(indices.dims.back());
  if (depth > data.dims.size()) {
    err = "indices address more dims than the data has";
    return false;
  }
  llvm::SmallVector<int64_t, 6> dataStrides = stridesOf(data.dims);
  int64_t slice = 1;
  for (size_t d = depth; d < data.dims.size(); ++d)
    slice *= data.dims[d];
  size_t tuples = depth ? indices.values.size() / depth : 0;
  if (int64_t(updates.values.size()) != int64_t(tuples) * slice) {
    err = "updates do not have the shape indices.shape[:-1] + data.shape[indices.shape[-1]:]";
    return false;
  }
  out = data;
  for (size_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (size_t d = 0; d < depth; ++d) {
      int64_t i = saturatingInt(indices.values[t * depth + d]);
      if (i < 0)
        i += data.dims[d];
      if (i < 0 || i >= data.dims[d]) {
        err = "index " + std::to_string(i) + " is out of range for a dim of size " +
              std::to_string(data.dims[d]);
        return false;
      }
      off += i * dataStrides[d];
    }
    for (int64_t e = 0; e < slice; ++e) {
      double &dst = out.values[size_t(off + e)];
      double u = updates.values[t * size_t(slice) + size_t(e)];
      dst = reduction == "add" ? dst + u : reduction == "mul" ? dst * u : u;
    }
  }
  return true;
}

bool foldRange(double start, double limit, double delta, DType dtype, ConstTensor &out,
               std::string &err) {
  if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
    err = "Range needs finite bounds and a non-zero delta";
    return false;
  }
  double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (count > double(kMaxFoldedElements)) {
    err = "Range would make more than " + std::to_string(kMaxFoldedElements) + " elements";
    return false;
  }
  out = shaped(dtype, {int64_t(count)});
  for (int64_t i = 0; i < int64_t(count); ++i)
    out.values[size_t(i)] = start + double(i) * delta;
  convertElements(out, dtype);
  return true;
}

void convertElements(ConstTensor &c, DType dtype) {
  c.dtype = dtype;
  for (double &v : c.values) {
    switch (dtype) {
    case DType::Bool:
      v = v != 0;
      break;
    case DType::I64:
    case DType::I32:
      v = std::isfinite(v) ? std::trunc(v) : 0;
      break;
    case DType::F32:
      v = double(float(v));
      break;
    case DType::F16:
      v = double(roundToHalf(float(v)));
      break;
    case DType::BF16:
      v = double(roundToBf16(float(v)));
      break;
    case DType::F64:
      break;
    }
  }
}

} // namespace ampc::onnxfe
