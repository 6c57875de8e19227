/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* npu-copycount: the bytes a process copies with memcpy and memmove
 *
 *   LD_PRELOAD=build/tests/tools/libnpu-copycount.so COMMAND
 *
 * Preloaded, it stands in front of the C library's memcpy, memmove and
 * their _chk forms, counts the calls and the bytes of those of at least
 * NPU_COPYCOUNT_MIN bytes (default 4096: a frame's row or more, not the
 * small struct copies every program makes), and at exit prints
 *   copycount: N copies of at least MIN bytes, B bytes (all: n, b)
 * to stderr, or appends it to the file NPU_COPYCOUNT_FILE names.
 * Copies a compiler inlined, and conversions that write a new frame
 * without memcpy (videoconvert's ORC code), are not seen: the count is a
 * lower bound of what a pipeline copies, for comparing one pipeline with
 * another on the same frames (docs/cost.md).  A developer tool, never
 * loaded by the plugin.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*CopyFunc) (void *, const void *, size_t);
typedef void *(*CopyChkFunc) (void *, const void *, size_t, size_t);

static atomic_ullong n_big, bytes_big, n_all, bytes_all;
static size_t min_bytes = 4096;

static void
count (size_t n)
{
  atomic_fetch_add_explicit (&n_all, 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&bytes_all, n, memory_order_relaxed);
  if (n >= min_bytes) {
    atomic_fetch_add_explicit (&n_big, 1, memory_order_relaxed);
    atomic_fetch_add_explicit (&bytes_big, n, memory_order_relaxed);
  }
}

/* Until dlsym() has answered (it may copy memory itself), a plain byte
 * loop; volatile, so that the compiler does not turn it into memcpy */
static void *
early_copy (void *dst, const void *src, size_t n)
{
  volatile unsigned char *d = dst;
  const unsigned char *s = src;

  if (d < s || d >= s + n) {
    for (size_t i = 0; i < n; i++)
      d[i] = s[i];
  } else {
    for (size_t i = n; i > 0; i--)
      d[i - 1] = s[i - 1];
  }
  return dst;
}

static CopyFunc
next_copy (const char *name, CopyFunc * cache)
{
  CopyFunc f = atomic_load_explicit ((_Atomic (CopyFunc) *) cache,
      memory_order_acquire);

  if (!f) {
    f = (CopyFunc) dlsym (RTLD_NEXT, name);
    atomic_store_explicit ((_Atomic (CopyFunc) *) cache, f,
        memory_order_release);
  }
  return f;
}

static CopyFunc real_memcpy, real_memmove;

void *
memcpy (void *dst, const void *src, size_t n)
{
  CopyFunc f = next_copy ("memcpy", &real_memcpy);

  count (n);
  return f ? f (dst, src, n) : early_copy (dst, src, n);
}

void *
memmove (void *dst, const void *src, size_t n)
{
  CopyFunc f = next_copy ("memmove", &real_memmove);

  count (n);
  return f ? f (dst, src, n) : early_copy (dst, src, n);
}

/* _FORTIFY_SOURCE's checked forms, which -O2 builds call instead */
void *
__memcpy_chk (void *dst, const void *src, size_t n, size_t dst_len)
{
  if (n > dst_len)
    abort ();
  return memcpy (dst, src, n);
}

void *
__memmove_chk (void *dst, const void *src, size_t n, size_t dst_len)
{
  if (n > dst_len)
    abort ();
  return memmove (dst, src, n);
}

__attribute__((constructor))
static void
copycount_init (void)
{
  const char *min = getenv ("NPU_COPYCOUNT_MIN");

  if (min && *min)
    min_bytes = strtoull (min, NULL, 10);
}

__attribute__((destructor))
static void
copycount_report (void)
{
  const char *path = getenv ("NPU_COPYCOUNT_FILE");
  FILE *out = path && *path ? fopen (path, "a") : NULL;

  /* after the program's own output, which exit() flushes later */
  fflush (stdout);
  fprintf (out ? out : stderr, "copycount: %llu copies of at least %zu "
      "bytes, %llu bytes (all: %llu, %llu)\n",
      (unsigned long long) atomic_load (&n_big), min_bytes,
      (unsigned long long) atomic_load (&bytes_big),
      (unsigned long long) atomic_load (&n_all),
      (unsigned long long) atomic_load (&bytes_all));
  if (out)
    fclose (out);
}
