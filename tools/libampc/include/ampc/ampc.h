//===- ampc/ampc.h - The ampc library (docs/library.md) -------*- C++ -*-===//
//
// Everything a host program needs: load a model (Model), choose a precision
// policy (Policy), rewrite it (Model::rewrite, with hooks and host passes),
// inspect the result (GraphView), compile and run it (Program), and extend
// the compiler with ops of its own (registerCustomOp). The headers use only
// the C++ standard library. Errors are values (Status, Result<T>); nothing
// throws.
//
// Thread safety: registerCustomOp is for start-up, before any other call
// that might run concurrently. After that, distinct Models and Programs may
// be used from different threads at once; one Model or Program is used from
// one thread at a time.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_AMPC_H
#define AMPC_PUBLIC_AMPC_H

#include "ampc/Compare.h"
#include "ampc/CustomOp.h"
#include "ampc/Graph.h"
#include "ampc/Model.h"
#include "ampc/ModelExport.h"
#include "ampc/Pipeline.h"
#include "ampc/Plan.h"
#include "ampc/Policy.h"
#include "ampc/Profile.h"
#include "ampc/Program.h"
#include "ampc/Status.h"
#include "ampc/Threads.h"
#include "ampc/Types.h"
#include "ampc/Version.h"
#include "ampc/View.h"
#include "ampc/World.h"

#endif
