/* SPDX-License-Identifier: MIT */
/*
 * internal.h - every layer's header at once, for the tests of internals
 * only.  No file of src/ includes it: code of a layer includes its own
 * layer's header and those below it, and bind.c the ones it binds
 * (tests/layers.sh checks both).
 */
#ifndef MKI_INTERNAL_H
#define MKI_INTERNAL_H

#include "base/annotate.h"
#include "base/base.h"
#include "os/os.h"
#include "page/page.h"
#include "page/purge.h"
#include "page/sizeclass.h"
#include "ctx/ctx.h"
#include "ctx/general.h"
#include "ctx/slab.h"
#include "ctx/generation.h"
#include "ctx/bump.h"
#include "check/check.h"
#include "heap/heap.h"
#include "stats.h"

#endif /* MKI_INTERNAL_H */
