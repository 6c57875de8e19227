/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rk-memory: NPU memory on a real kernel (run inside the QEMU guest)
 *
 *   rk-memory            every check below
 *   rk-memory --paths    allocator paths only (dma-heap, udmabuf, memfd)
 *   rk-memory --sync     DMA_BUF_IOCTL_SYNC bracketing only
 *
 * Paths: gst_npu_allocator_new (NULL) picks the system DMA heap; with
 * GST_NPU_DMA_HEAP naming a missing heap it falls back to udmabuf; with
 * GST_NPU_UDMABUF_DEVICE pointing nowhere as well, to a plain memfd.  Each
 * is checked by what the kernel says about the fd (/proc/self/fdinfo's
 * exp_name line), not by what the allocator says about itself.
 *
 * Sync: a child process maps, writes, unmaps, maps, reads and unmaps an NPU
 * memory, with marker syscalls around each CPU access.  It runs under
 * `strace -f -e trace=ioctl` (the syscall order: a DMA_BUF_IOCTL_SYNC on the
 * memory's fd before each access and after it) and, at the same time, under
 * a kprobe on the kernel's dma_buf_ioctl that records the flags the kernel
 * received (strace does not decode struct dma_buf_sync): SYNC_START before
 * the access, SYNC_END after, with the access direction.
 */
#include "rk-common.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <gst/gst.h>
#include <gst/allocators/allocators.h>
#include <npu/npu.h>
#include <npu/gstnpuallocator.h>

#define MEM_SIZE (1024 * 1024 + 100)    /* not a whole number of pages */

/* Marker "syscalls": an ioctl on fd -1 (fails with EBADF at once, shows up
 * in strace with its argument) plus a line in the ftrace buffer. */
#define RK_MARK_REQ 0x524b0000u
#define RK_MARK_BASE 0x524b0100u
enum
{
  MARK_START = 1,
  MARK_WRITE_BEGIN,
  MARK_WRITE_END,
  MARK_WRITE_UNMAPPED,
  MARK_READ_BEGIN,
  MARK_READ_END,
  MARK_READ_UNMAPPED,
};
static int trace_marker_fd = -1;

static void
mark (unsigned code)
{
  char line[64];
  int n;

  (void) ioctl (-1, RK_MARK_REQ, (unsigned long) (RK_MARK_BASE + code));
  if (trace_marker_fd >= 0) {
    n = snprintf (line, sizeof line, "rk-mark 0x%x\n", RK_MARK_BASE + code);
    if (write (trace_marker_fd, line, n) < 0) {
      /* tracing is optional for the child */
    }
  }
}

static guint8
pattern (gsize i, guint seed)
{
  return (guint8) ((i * 131u + seed * 7u + (i >> 12)) & 0xff);
}

static gboolean
check_pattern (const guint8 * p, gsize n, guint seed, gsize * bad)
{
  gsize i;
  for (i = 0; i < n; i++)
    if (p[i] != pattern (i, seed)) {
      *bad = i;
      return FALSE;
    }
  return TRUE;
}

static int
raw_sync (int fd, guint64 flags)
{
  struct dma_buf_sync s = {.flags = flags };
  return ioctl (fd, DMA_BUF_IOCTL_SYNC, &s);
}

/* Write through gst_memory_map, read through a second mmap of the fd; then
 * the other way round. */
static void
check_two_mappings (GstMemory * mem, gboolean dmabuf, const char *what)
{
  GstMapInfo info;
  int fd = gst_fd_memory_get_fd (mem);
  gsize size = gst_memory_get_sizes (mem, NULL, NULL), bad = 0, i;
  guint8 *m;

  RK_CHECK (gst_memory_map (mem, &info, GST_MAP_WRITE),
      "%s: gst_memory_map WRITE", what);
  if (info.data == NULL)
    return;
  RK_CHECK (((guintptr) info.data & 127) == 0,
      "%s: mapping is 128-byte aligned (%p)", what, info.data);
  for (i = 0; i < size; i++)
    info.data[i] = pattern (i, 1);
  gst_memory_unmap (mem, &info);

  m = mmap (NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  RK_CHECK (m != MAP_FAILED, "%s: second mmap of fd %d", what, fd);
  if (m == MAP_FAILED)
    return;
  if (dmabuf)
    RK_CHECK (raw_sync (fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW) == 0,
        "%s: DMA_BUF_IOCTL_SYNC START on the second mapping", what);
  RK_CHECK (check_pattern (m, size, 1, &bad),
      "%s: pattern written through gst_memory_map reads back through the "
      "second mmap (%" G_GSIZE_FORMAT " bytes; first bad byte %"
      G_GSIZE_FORMAT ")", what, size, bad);
  for (i = 0; i < size; i++)
    m[i] = pattern (i, 2);
  if (dmabuf)
    RK_CHECK (raw_sync (fd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW) == 0,
        "%s: DMA_BUF_IOCTL_SYNC END on the second mapping", what);
  munmap (m, size);

  RK_CHECK (gst_memory_map (mem, &info, GST_MAP_READ),
      "%s: gst_memory_map READ", what);
  if (info.data == NULL)
    return;
  RK_CHECK (check_pattern (info.data, size, 2, &bad),
      "%s: pattern written through the second mmap reads back through "
      "gst_memory_map (first bad byte %" G_GSIZE_FORMAT ")", what, bad);
  gst_memory_unmap (mem, &info);
}

static void
check_path (GstNpuMemoryPath want, const char *exp_name, const char *what)
{
  GstAllocator *alloc = gst_npu_allocator_new (NULL);
  GstNpuMemoryPath path;
  GstMemory *mem;
  gsize size, maxsize;
  int fd;

  RK_CHECK (alloc != NULL, "%s: gst_npu_allocator_new (NULL)", what);
  if (!alloc)
    return;
  path = gst_npu_allocator_get_path (alloc);
  RK_INFO ("%s: allocator %s, path %s, device %s", what,
      G_OBJECT_TYPE_NAME (alloc), gst_npu_memory_path_to_string (path),
      gst_npu_allocator_get_device (alloc) ?
      gst_npu_allocator_get_device (alloc) : "(none)");
  RK_CHECK (gst_is_npu_allocator (alloc), "%s: gst_is_npu_allocator", what);
  RK_CHECK (path == want, "%s: gst_npu_allocator_get_path is %s (got %s)",
      what, gst_npu_memory_path_to_string (want),
      gst_npu_memory_path_to_string (path));

  mem = gst_allocator_alloc (alloc, MEM_SIZE, NULL);
  RK_CHECK (mem != NULL, "%s: allocate %d bytes", what, MEM_SIZE);
  if (!mem) {
    gst_object_unref (alloc);
    return;
  }
  size = gst_memory_get_sizes (mem, NULL, &maxsize);
  RK_CHECK (size == MEM_SIZE && maxsize >= size,
      "%s: size %" G_GSIZE_FORMAT ", maxsize %" G_GSIZE_FORMAT, what, size,
      maxsize);
  RK_CHECK (gst_is_npu_memory (mem), "%s: gst_is_npu_memory", what);
  RK_CHECK (gst_is_fd_memory (mem), "%s: gst_is_fd_memory", what);
  fd = gst_fd_memory_get_fd (mem);
  RK_CHECK (fd >= 0, "%s: memory has fd %d", what, fd);
  rk_fdinfo_print (fd, what);

  if (want == GST_NPU_MEMORY_PATH_MEMFD) {
    gchar *link = g_strdup_printf ("/proc/self/fd/%d", fd);
    gchar *target = g_file_read_link (link, NULL);
    gchar *e = rk_fdinfo_get (fd, "exp_name");
    RK_CHECK (!gst_is_dmabuf_memory (mem),
        "%s: gst_is_dmabuf_memory is FALSE", what);
    RK_CHECK (e == NULL, "%s: fdinfo has no exp_name (not a dma-buf)", what);
    RK_CHECK (target && g_str_has_prefix (target, "/memfd:"),
        "%s: fd is a memfd (%s)", what, target ? target : "?");
    g_free (e);
    g_free (target);
    g_free (link);
  } else {
    gchar *line = g_strdup_printf ("exp_name:\t%s", exp_name);
    gchar *sz = rk_fdinfo_get (fd, "size");
    RK_CHECK (gst_is_dmabuf_memory (mem),
        "%s: gst_is_dmabuf_memory is TRUE", what);
    RK_CHECK (rk_fdinfo_has_line (fd, line),
        "%s: /proc/self/fdinfo/%d has the line \"exp_name:\\t%s\"", what,
        fd, exp_name);
    RK_CHECK (sz && g_ascii_strtoull (sz, NULL, 10) >= maxsize &&
        g_ascii_strtoull (sz, NULL, 10) % sysconf (_SC_PAGESIZE) == 0,
        "%s: dma-buf size %s is whole pages and holds maxsize", what,
        sz ? sz : "?");
    g_free (sz);
    g_free (line);
  }
  check_two_mappings (mem, want != GST_NPU_MEMORY_PATH_MEMFD, what);
  gst_memory_unref (mem);
  gst_object_unref (alloc);
}

static void
test_paths (void)
{
  g_unsetenv ("GST_NPU_DMA_HEAP");
  g_unsetenv ("GST_NPU_UDMABUF_DEVICE");
  check_path (GST_NPU_MEMORY_PATH_DMA_HEAP, "system", "dma-heap");

  g_setenv ("GST_NPU_DMA_HEAP", "does-not-exist", TRUE);
  check_path (GST_NPU_MEMORY_PATH_UDMABUF, "udmabuf", "udmabuf");

  g_setenv ("GST_NPU_UDMABUF_DEVICE", "/nonexistent", TRUE);
  check_path (GST_NPU_MEMORY_PATH_MEMFD, NULL, "memfd");

  g_unsetenv ("GST_NPU_DMA_HEAP");
  g_unsetenv ("GST_NPU_UDMABUF_DEVICE");
}

/* ---- the traced child --------------------------------------------------- */

static int
sync_child (void)
{
  GstAllocator *alloc = gst_npu_allocator_new (NULL);
  GstMemory *mem;
  GstMapInfo info;
  gsize i, size;
  guint sum = 0;

  trace_marker_fd = open ("/sys/kernel/tracing/trace_marker",
      O_WRONLY | O_CLOEXEC);
  if (!alloc)
    return 2;
  mem = gst_allocator_alloc (alloc, MEM_SIZE, NULL);
  if (!mem)
    return 2;
  size = gst_memory_get_sizes (mem, NULL, NULL);
  printf ("fd=%d path=%s\n", gst_fd_memory_get_fd (mem),
      gst_npu_memory_path_to_string (gst_npu_allocator_get_path (alloc)));
  fflush (stdout);

  mark (MARK_START);
  if (!gst_memory_map (mem, &info, GST_MAP_WRITE))
    return 3;
  mark (MARK_WRITE_BEGIN);
  for (i = 0; i < size; i++)
    info.data[i] = pattern (i, 3);
  mark (MARK_WRITE_END);
  gst_memory_unmap (mem, &info);
  mark (MARK_WRITE_UNMAPPED);

  if (!gst_memory_map (mem, &info, GST_MAP_READ))
    return 3;
  mark (MARK_READ_BEGIN);
  for (i = 0; i < size; i++)
    sum += info.data[i] == pattern (i, 3);
  mark (MARK_READ_END);
  gst_memory_unmap (mem, &info);
  mark (MARK_READ_UNMAPPED);

  gst_memory_unref (mem);
  gst_object_unref (alloc);
  return sum == size ? 0 : 4;
}

/* ---- the parent: strace + kprobe, then the checks ------------------------ */

typedef struct
{
  char kind;                    /* 'S' sync ioctl on the memory's fd, 'M' marker */
  guint code;                   /* marker code, or the sync flags (kprobe) */
  gboolean ok;                  /* the ioctl returned 0 (strace) */
} Event;

static gboolean
tracefs_write (const char *file, const char *text, gboolean append)
{
  gchar *p = g_strdup_printf ("/sys/kernel/tracing/%s", file);
  int fd = open (p, O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
  gboolean ok = fd >= 0 && write (fd, text, strlen (text)) == (ssize_t)
      strlen (text);
  if (fd >= 0)
    close (fd);
  g_free (p);
  return ok;
}

/* Parse `strace -f -e trace=ioctl` output. */
static GArray *
parse_strace (const gchar * out, int memfd)
{
  GArray *ev = g_array_new (FALSE, TRUE, sizeof (Event));
  gchar **lines = g_strsplit (out, "\n", -1), **l;
  gchar *sync_prefix = g_strdup_printf ("ioctl(%d, DMA_BUF_IOCTL_SYNC,", memfd);

  for (l = lines; *l; l++) {
    const gchar *s = *l, *p;
    Event e = { 0, 0, FALSE };
    while (g_ascii_isdigit (*s) || *s == ' ')   /* "PID " prefix of -f */
      s++;
    if (g_str_has_prefix (s, sync_prefix)) {
      e.kind = 'S';
      p = strrchr (s, '=');
      e.ok = p && g_str_has_prefix (p, "= 0");
    } else if (g_str_has_prefix (s, "ioctl(-1,")
        && (p = strstr (s, ", 0x524b01")) != NULL) {
      e.kind = 'M';
      e.code = (guint) g_ascii_strtoull (p + 2, NULL, 16) - RK_MARK_BASE;
    } else
      continue;
    g_array_append_val (ev, e);
  }
  g_free (sync_prefix);
  g_strfreev (lines);
  return ev;
}

/* Parse the ftrace buffer: our kprobe on dma_buf_ioctl and the markers. */
static GArray *
parse_ftrace (const gchar * out, GPid child)
{
  GArray *ev = g_array_new (FALSE, TRUE, sizeof (Event));
  gchar **lines = g_strsplit (out, "\n", -1), **l;
  gchar *pidtag = g_strdup_printf ("-%d ", (int) child);

  for (l = lines; *l; l++) {
    const gchar *p;
    Event e = { 0, 0, TRUE };
    if (**l == '#' || !strstr (*l, pidtag))
      continue;
    if ((p = strstr (*l, "rk_dmabuf_ioctl:")) != NULL) {
      const gchar *c = strstr (p, "cmd=0x"), *f = strstr (p, "flags=0x");
      if (!c || !f || (guint) g_ascii_strtoull (c + 4, NULL, 16) !=
          (guint) DMA_BUF_IOCTL_SYNC)
        continue;
      e.kind = 'S';
      e.code = (guint) g_ascii_strtoull (f + 6, NULL, 16);
    } else if ((p = strstr (*l, "rk-mark 0x")) != NULL) {
      e.kind = 'M';
      e.code = (guint) g_ascii_strtoull (p + 8, NULL, 16) - RK_MARK_BASE;
    } else
      continue;
    g_array_append_val (ev, e);
  }
  g_free (pidtag);
  g_strfreev (lines);
  return ev;
}

/* Index of marker @code in @ev, or -1. */
static gint
find_mark (GArray * ev, guint code)
{
  guint i;
  for (i = 0; i < ev->len; i++) {
    Event *e = &g_array_index (ev, Event, i);
    if (e->kind == 'M' && e->code == code)
      return (gint) i;
  }
  return -1;
}

/* Sync events strictly between markers a and b: count, and OR of the flags
 * of the last one (kprobe) / whether all returned 0 (strace). */
static guint
syncs_between (GArray * ev, guint a, guint b, guint * last_flags,
    gboolean * all_ok)
{
  gint ia = find_mark (ev, a), ib = find_mark (ev, b), i;
  guint n = 0;

  *last_flags = 0xffffffff;
  *all_ok = TRUE;
  if (ia < 0 || ib < 0 || ib < ia)
    return 0;
  for (i = ia + 1; i < ib; i++) {
    Event *e = &g_array_index (ev, Event, i);
    if (e->kind != 'S')
      continue;
    n++;
    *last_flags = e->code;
    *all_ok = *all_ok && e->ok;
  }
  return n;
}

static const char *
sync_flags_str (guint f)
{
  static char buf[64];
  if (f == 0xffffffff)
    return "none";
  g_snprintf (buf, sizeof buf, "%s|%s (0x%x)",
      (f & DMA_BUF_SYNC_END) ? "DMA_BUF_SYNC_END" : "DMA_BUF_SYNC_START",
      (f & DMA_BUF_SYNC_RW) == DMA_BUF_SYNC_RW ? "DMA_BUF_SYNC_RW" :
      (f & DMA_BUF_SYNC_WRITE) ? "DMA_BUF_SYNC_WRITE" :
      (f & DMA_BUF_SYNC_READ) ? "DMA_BUF_SYNC_READ" : "0", f);
  return buf;
}

static void
check_sync_events (GArray * ev, const char *src, gboolean have_flags,
    const char *what)
{
  static const struct
  {
    guint a, b;
    gboolean end, write;
    const char *when;
  } spans[] = {
    {MARK_START, MARK_WRITE_BEGIN, FALSE, TRUE, "map for WRITE, before the write"},
    {MARK_WRITE_BEGIN, MARK_WRITE_END, FALSE, TRUE, "during the write"},
    {MARK_WRITE_END, MARK_WRITE_UNMAPPED, TRUE, TRUE, "unmap, after the write"},
    {MARK_WRITE_UNMAPPED, MARK_READ_BEGIN, FALSE, FALSE, "map for READ, before the read"},
    {MARK_READ_BEGIN, MARK_READ_END, FALSE, FALSE, "during the read"},
    {MARK_READ_END, MARK_READ_UNMAPPED, TRUE, FALSE, "unmap, after the read"},
  };
  guint i, flags, n;
  gboolean all_ok;

  for (i = 0; i < G_N_ELEMENTS (spans); i++) {
    n = syncs_between (ev, spans[i].a, spans[i].b, &flags, &all_ok);
    if (spans[i].a + 1 == spans[i].b && (spans[i].a == MARK_WRITE_BEGIN ||
            spans[i].a == MARK_READ_BEGIN)) {
      RK_CHECK (n == 0, "%s (%s): no DMA_BUF_IOCTL_SYNC %s (saw %u)", what,
          src, spans[i].when, n);
      continue;
    }
    if (!have_flags) {
      RK_CHECK (n >= 1 && all_ok, "%s (%s): DMA_BUF_IOCTL_SYNC = 0 on the "
          "memory's fd at %s (saw %u)", what, src, spans[i].when, n);
      continue;
    }
    {
      gboolean end_ok = spans[i].end ? (flags & DMA_BUF_SYNC_END) != 0 :
          (flags & DMA_BUF_SYNC_END) == 0;
      guint dir = spans[i].write ? DMA_BUF_SYNC_WRITE : DMA_BUF_SYNC_READ;
      RK_CHECK (n >= 1 && flags != 0xffffffff && end_ok && (flags & dir),
          "%s (%s): kernel got DMA_BUF_IOCTL_SYNC %s at %s", what, src,
          sync_flags_str (flags), spans[i].when);
    }
  }
}

static void
test_sync_one (const char *self, const char *what, const char *heap_env)
{
  gchar *strace_out = g_strdup_printf ("/tmp/rk-memory-strace-%s.txt", what);
  gchar *strace = g_find_program_in_path ("strace");
  gchar *out = NULL, *err = NULL, *log = NULL, *ftrace = NULL;
  gchar **envp = g_get_environ ();
  gint status = -1, memfd = -1;
  GError *error = NULL;
  gboolean kprobe;
  GPid child = 0;
  const gchar *p;

  RK_CHECK (strace != NULL, "%s: strace is installed", what);
  if (!strace)
    goto out;
  if (heap_env)
    envp = g_environ_setenv (envp, "GST_NPU_DMA_HEAP", heap_env, TRUE);

  /* A kprobe on dma_buf_ioctl(file, cmd, arg) that records cmd and the
   * first 8 bytes at the user pointer arg (struct dma_buf_sync.flags). */
  tracefs_write ("tracing_on", "0", FALSE);
  tracefs_write ("kprobe_events", "-:rk/rk_dmabuf_ioctl\n", TRUE);
  kprobe = tracefs_write ("kprobe_events",
      "p:rk/rk_dmabuf_ioctl dma_buf_ioctl cmd=%si:x32 flags=+u0(%dx):x64\n",
      TRUE)
      && tracefs_write ("events/rk/rk_dmabuf_ioctl/enable", "1", FALSE)
      && tracefs_write ("trace", "", FALSE)
      && tracefs_write ("tracing_on", "1", FALSE);
  RK_CHECK (kprobe, "%s: kprobe on dma_buf_ioctl set up in tracefs", what);

  {
    /* strace -o: the trace goes to a file, the child's stdout to us */
    const gchar *argv[] = { strace, "-f", "-qq", "-e", "trace=ioctl",
      "-o", strace_out, self, "--sync-child", NULL
    };
    g_spawn_sync (NULL, (gchar **) argv, envp, G_SPAWN_DEFAULT, NULL, NULL,
        &out, &err, &status, &error);
  }
  tracefs_write ("tracing_on", "0", FALSE);
  RK_CHECK (error == NULL && g_spawn_check_wait_status (status, NULL),
      "%s: traced child mapped, wrote, read back the pattern (exit status %d)",
      what, status);
  if (error) {
    RK_INFO ("  %s", error->message);
    g_clear_error (&error);
  }
  if (err && *err)
    RK_INFO ("child stderr: %s", err);
  if (out && (p = strstr (out, "fd=")) != NULL)
    memfd = atoi (p + 3);
  RK_INFO ("%s: child says %s", what, out ? g_strstrip (out) : "(nothing)");

  if (g_file_get_contents (strace_out, &log, NULL, NULL)) {
    gchar **lines = g_strsplit (log, "\n", -1), **l;
    GArray *ev;
    for (l = lines; *l; l++) {
      const gchar *s = *l;
      while (g_ascii_isdigit (*s) || *s == ' ')
        s++;
      if (g_str_has_prefix (s, "ioctl(-1,") || strstr (s, "DMA_BUF_IOCTL"))
        RK_INFO ("strace: %s", s);
      /* the child's pid, to find its lines in the ftrace buffer */
      if (child == 0 && g_ascii_isdigit (**l))
        child = (GPid) atoi (*l);
    }
    g_strfreev (lines);
    ev = parse_strace (log, memfd);
    RK_CHECK (memfd >= 0 && find_mark (ev, MARK_READ_UNMAPPED) > 0,
        "%s: strace saw the child's markers", what);
    check_sync_events (ev, "strace", FALSE, what);
    g_array_unref (ev);
  } else
    RK_CHECK (FALSE, "%s: strace wrote %s", what, strace_out);

  if (kprobe) {
    gchar *path = g_strdup ("/sys/kernel/tracing/trace");
    if (g_file_get_contents (path, &ftrace, NULL, NULL)) {
      GArray *ev;
      /* the traced child is the only one writing markers: find its pid */
      if ((p = strstr (ftrace, "rk-mark 0x")) != NULL) {
        const gchar *b = p;
        while (b > ftrace && b[-1] != '\n')
          b--;
        /* "   rk-memory-123  [001] ..." : the pid ends the first word */
        {
          gchar *head = g_strndup (b, p - b);
          gchar **w = g_strsplit_set (g_strstrip (head), " ", 2);
          const gchar *dash = w[0] ? strrchr (w[0], '-') : NULL;
          if (dash)
            child = (GPid) atoi (dash + 1);
          g_strfreev (w);
          g_free (head);
        }
      }
      ev = parse_ftrace (ftrace, child);
      {
        guint i;
        for (i = 0; i < ev->len; i++) {
          Event *e = &g_array_index (ev, Event, i);
          if (e->kind == 'S')
            RK_INFO ("kprobe: dma_buf_ioctl(DMA_BUF_IOCTL_SYNC, flags=%s)",
                sync_flags_str (e->code));
          else
            RK_INFO ("kprobe: marker %u", e->code);
        }
      }
      check_sync_events (ev, "kprobe", TRUE, what);
      g_array_unref (ev);
    } else
      RK_CHECK (FALSE, "%s: read the ftrace buffer", what);
    g_free (path);
    tracefs_write ("events/rk/rk_dmabuf_ioctl/enable", "0", FALSE);
    tracefs_write ("kprobe_events", "-:rk/rk_dmabuf_ioctl\n", TRUE);
  }

out:
  g_strfreev (envp);
  g_free (strace);
  g_free (strace_out);
  g_free (out);
  g_free (err);
  g_free (log);
  g_free (ftrace);
}

static void
test_sync (const char *self)
{
  test_sync_one (self, "sync-dma-heap", NULL);
  test_sync_one (self, "sync-udmabuf", "does-not-exist");
}

int
main (int argc, char **argv)
{
  gboolean paths = TRUE, sync = TRUE;
  gchar *self;

  gst_init (&argc, &argv);
  if (argc > 1 && strcmp (argv[1], "--sync-child") == 0)
    return sync_child ();
  if (argc > 1 && strcmp (argv[1], "--paths") == 0)
    sync = FALSE;
  if (argc > 1 && strcmp (argv[1], "--sync") == 0)
    paths = FALSE;

  {
    gchar *v = NULL;
    if (g_file_get_contents ("/proc/version", &v, NULL, NULL))
      RK_INFO ("%s", g_strstrip (v));
    g_free (v);
  }
  if (paths)
    test_paths ();
  if (sync) {
    self = g_file_read_link ("/proc/self/exe", NULL);
    test_sync (self ? self : argv[0]);
    g_free (self);
  }
  return rk_finish ("rk-memory");
}
