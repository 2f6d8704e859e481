/*
 * purge.c - *when* memory goes back to the OS (os/ knows *how*): today the
 * explicit mk_trim(); the delayed, switchable policy grows here.
 *
 * mk_trim gives back everything memkit holds free, in order: heaps of
 * exited threads that emptied (their chunks were freed by other threads
 * after the exit, so no thread event swept them), then the mappings of
 * freed huge chunks kept for reuse, then empty segments and the free OS
 * pages inside partly used ones.
 */
#include "internal.h"

size_t mk_trim(void)
{
    mki_heap_sweep_orphans(-1);
    return mki_huge_trim() + mki_segment_trim();
}
