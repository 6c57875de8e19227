/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: NPU memory
 *
 * See gstnpuallocator.h for the order in which memory sources are tried.
 * The probe happens once per allocator, when it is made: a heap or udmabuf
 * node that is missing or refuses us is logged and the next one tried, so
 * a machine without any of them still gets working (memfd) memory.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuallocator.h"
#include "gstnpucpuaccess.h"
#include "gstnpuprivate.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_allocator_debug);
#define GST_CAT_DEFAULT gst_npu_allocator_debug

#define DEFAULT_HEAP "system"
#define DEFAULT_UDMABUF "/dev/udmabuf"

/* Both GTypes share this instance state; it sits after the parent struct. */
typedef struct
{
  GstNpuMemoryPath path;
  gchar *heap;                  /* as asked for */
  gchar *device;                /* node in use, or "memfd" */
  int device_fd;                /* heap or udmabuf node, -1 for memfd */
  gint64 fence_timeout_us;
  GstMemoryMapFullFunction parent_map_full;
  GstMemoryUnmapFullFunction parent_unmap_full;
} NpuAllocState;

typedef struct
{
  GstDmaBufAllocator parent;
  NpuAllocState state;
} GstNpuDmaBufAllocator;

typedef struct
{
  GstDmaBufAllocatorClass parent_class;
} GstNpuDmaBufAllocatorClass;

typedef struct
{
  GstFdAllocator parent;
  NpuAllocState state;
} GstNpuFdAllocator;

typedef struct
{
  GstFdAllocatorClass parent_class;
} GstNpuFdAllocatorClass;

G_DEFINE_TYPE (GstNpuDmaBufAllocator, gst_npu_dmabuf_allocator,
    GST_TYPE_DMABUF_ALLOCATOR);
G_DEFINE_TYPE (GstNpuFdAllocator, gst_npu_fd_allocator, GST_TYPE_FD_ALLOCATOR);

enum
{
  PROP_0,
  PROP_HEAP,
  PROP_PATH,
  PROP_DEVICE,
};

static GQuark fence_quark;
/* Guards the fence qdata of every NPU memory, so that a map can take a
 * reference to the fence while a producer replaces it. */
static GMutex fence_lock;

GType
gst_npu_memory_path_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_MEMORY_PATH_DMA_HEAP, "A DMA-BUF heap", "dma-heap"},
    {GST_NPU_MEMORY_PATH_UDMABUF, "udmabuf over a sealed memfd", "udmabuf"},
    {GST_NPU_MEMORY_PATH_MEMFD, "A plain memfd (not a dma-buf)", "memfd"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuMemoryPath", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

const gchar *
gst_npu_memory_path_to_string (GstNpuMemoryPath path)
{
  switch (path) {
    case GST_NPU_MEMORY_PATH_DMA_HEAP:
      return "dma-heap";
    case GST_NPU_MEMORY_PATH_UDMABUF:
      return "udmabuf";
    case GST_NPU_MEMORY_PATH_MEMFD:
      return "memfd";
  }
  return "unknown";
}

gboolean
gst_is_npu_allocator (GstAllocator * allocator)
{
  return allocator && (G_TYPE_CHECK_INSTANCE_TYPE (allocator,
          GST_TYPE_NPU_DMABUF_ALLOCATOR)
      || G_TYPE_CHECK_INSTANCE_TYPE (allocator, GST_TYPE_NPU_FD_ALLOCATOR));
}

static NpuAllocState *
get_state (GstAllocator * allocator)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (allocator, GST_TYPE_NPU_DMABUF_ALLOCATOR))
    return &((GstNpuDmaBufAllocator *) allocator)->state;
  if (G_TYPE_CHECK_INSTANCE_TYPE (allocator, GST_TYPE_NPU_FD_ALLOCATOR))
    return &((GstNpuFdAllocator *) allocator)->state;
  return NULL;
}

/* ------------------------------------------------------------------------
 * Probing and allocating the three kinds of memory
 */
static gchar *
heap_path (const gchar * heap)
{
  if (g_path_is_absolute (heap))
    return g_strdup (heap);
  return g_build_filename ("/dev/dma_heap", heap, NULL);
}

static int
heap_alloc (int heap_fd, gsize size)
{
  struct dma_heap_allocation_data data;

  memset (&data, 0, sizeof (data));
  data.len = size;
  data.fd_flags = O_RDWR | O_CLOEXEC;
  if (ioctl (heap_fd, DMA_HEAP_IOCTL_ALLOC, &data) < 0)
    return -1;
  return data.fd;
}

static int
memfd_alloc (gsize size, gboolean sealed)
{
  int fd = memfd_create ("gst-npu", MFD_CLOEXEC |
      (sealed ? MFD_ALLOW_SEALING : 0));

  if (fd < 0)
    return -1;
  if (ftruncate (fd, size) < 0) {
    close (fd);
    return -1;
  }
  /* udmabuf pins the pages and insists they cannot be truncated away. */
  if (sealed && fcntl (fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
    close (fd);
    return -1;
  }
  return fd;
}

static int
udmabuf_alloc (int udmabuf_fd, gsize size)
{
  struct udmabuf_create create;
  int memfd, fd, saved;

  memfd = memfd_alloc (size, TRUE);
  if (memfd < 0)
    return -1;
  memset (&create, 0, sizeof (create));
  create.memfd = memfd;
  create.flags = UDMABUF_FLAGS_CLOEXEC;
  create.offset = 0;
  create.size = size;
  fd = ioctl (udmabuf_fd, UDMABUF_CREATE, &create);
  saved = errno;
  /* The dma-buf holds the pages; the memfd is no longer needed. */
  close (memfd);
  errno = saved;
  return fd;
}

/* Allocates one dma-buf/memfd of @size bytes on @state's path. */
static int
state_alloc_fd (NpuAllocState * state, gsize size)
{
  switch (state->path) {
    case GST_NPU_MEMORY_PATH_DMA_HEAP:
      return heap_alloc (state->device_fd, size);
    case GST_NPU_MEMORY_PATH_UDMABUF:
      return udmabuf_alloc (state->device_fd, size);
    case GST_NPU_MEMORY_PATH_MEMFD:
      return memfd_alloc (size, FALSE);
  }
  return -1;
}

/* Opens @node and proves it can allocate, so a node that exists but refuses
 * us (permissions, wrong kind of file, no memory) is skipped at once rather
 * than failing every allocation later. */
static gboolean
probe_node (NpuAllocState * state, GstNpuMemoryPath path, const gchar * node)
{
  int fd, test;

  fd = open (node, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    GST_INFO ("NPU memory: %s %s unavailable: %s, trying the next kind",
        gst_npu_memory_path_to_string (path), node, g_strerror (errno));
    return FALSE;
  }
  state->path = path;
  state->device_fd = fd;
  test = state_alloc_fd (state, sysconf (_SC_PAGESIZE));
  if (test < 0) {
    GST_INFO ("NPU memory: %s %s refuses to allocate: %s, trying the next "
        "kind", gst_npu_memory_path_to_string (path), node, g_strerror (errno));
    close (fd);
    state->device_fd = -1;
    return FALSE;
  }
  close (test);
  state->device = g_strdup (node);
  return TRUE;
}

static gboolean
probe (const gchar * heap, NpuAllocState * state)
{
  const gchar *udmabuf;
  gchar *node;
  gboolean ok;

  if (!heap || !*heap)
    heap = g_getenv ("GST_NPU_DMA_HEAP");
  if (!heap || !*heap)
    heap = DEFAULT_HEAP;
  state->heap = g_strdup (heap);

  node = heap_path (heap);
  ok = probe_node (state, GST_NPU_MEMORY_PATH_DMA_HEAP, node);
  g_free (node);
  if (ok)
    return TRUE;

  udmabuf = g_getenv ("GST_NPU_UDMABUF_DEVICE");
  if (!udmabuf || !*udmabuf)
    udmabuf = DEFAULT_UDMABUF;
  if (probe_node (state, GST_NPU_MEMORY_PATH_UDMABUF, udmabuf))
    return TRUE;

  state->path = GST_NPU_MEMORY_PATH_MEMFD;
  state->device_fd = -1;
  state->device = g_strdup ("memfd");
  return FALSE;
}

/* ------------------------------------------------------------------------
 * Memory
 */
static GstMemory *
npu_alloc (GstAllocator * allocator, gsize size, GstAllocationParams * params)
{
  NpuAllocState *state = get_state (allocator);
  GstAllocationParams defaults;
  gsize page = sysconf (_SC_PAGESIZE), offset, total, maxsize, mask;
  GstMemory *mem;
  int fd;

  if (!params) {
    gst_allocation_params_init (&defaults);
    params = &defaults;
  }
  /* The mapping is page aligned, which satisfies any alignment up to a
   * page; the prefix is rounded up so that the data starts on a 128-byte
   * line and at the alignment asked for, whichever is stricter. */
  if (params->align >= page) {
    GST_WARNING_OBJECT (allocator, "alignment %" G_GSIZE_FORMAT " exceeds "
        "a page, cannot honour it", params->align + 1);
    return NULL;
  }
  mask = params->align | (GST_NPU_ALIGN - 1);
  offset = (params->prefix + mask) & ~mask;
  total = offset + size + params->padding;
  maxsize = GST_ROUND_UP_N (MAX (total, 1), page);

  fd = state_alloc_fd (state, maxsize);
  if (fd < 0) {
    GST_ERROR_OBJECT (allocator, "cannot allocate %" G_GSIZE_FORMAT
        " bytes of %s memory (%s): %s", maxsize,
        gst_npu_memory_path_to_string (state->path), state->device,
        g_strerror (errno));
    return NULL;
  }
  /* KEEP_MAPPED: map once, on first use, and keep the mapping for the
   * memory's life; pools recycle memories, so each is mmapped once. */
  mem = gst_fd_allocator_alloc (allocator, fd, maxsize,
      GST_FD_MEMORY_FLAG_KEEP_MAPPED);
  gst_memory_resize (mem, offset, size);
  GST_MINI_OBJECT_FLAGS (mem) |= params->flags;
  GST_LOG_OBJECT (allocator, "allocated %" G_GSIZE_FORMAT " bytes (fd %d, "
      "%s)", size, fd, gst_npu_memory_path_to_string (state->path));
  return mem;
}

static GstMemory *
root_memory (GstMemory * mem)
{
  return mem->parent ? mem->parent : mem;
}

gboolean
gst_is_npu_memory (GstMemory * mem)
{
  return mem && gst_is_npu_allocator (mem->allocator);
}

/**
 * gst_npu_memory_set_fence:
 * @fence: (nullable): signals when @mem holds its data; %NULL clears it
 *
 * Makes every later map of @mem (and of memories shared from it) wait for
 * @fence first.
 */
void
gst_npu_memory_set_fence (GstMemory * mem, NpuFence * fence)
{
  GstMiniObject *root;
  NpuFence *old;

  g_return_if_fail (gst_is_npu_memory (mem));

  root = GST_MINI_OBJECT (root_memory (mem));
  g_mutex_lock (&fence_lock);
  old = gst_mini_object_steal_qdata (root, fence_quark);
  if (fence)
    gst_mini_object_set_qdata (root, fence_quark, npu_fence_ref (fence),
        (GDestroyNotify) npu_fence_unref);
  g_mutex_unlock (&fence_lock);
  /* Outside the lock: dropping an unsignalled fence runs its callbacks. */
  if (old)
    npu_fence_unref (old);
}

/* The fence pending on @mem, referenced. */
static NpuFence *
memory_ref_fence (GstMemory * mem)
{
  NpuFence *fence;

  g_mutex_lock (&fence_lock);
  fence = gst_mini_object_get_qdata (GST_MINI_OBJECT (root_memory (mem)),
      fence_quark);
  if (fence)
    npu_fence_ref (fence);
  g_mutex_unlock (&fence_lock);
  return fence;
}

/**
 * gst_npu_memory_get_fence:
 *
 * Returns: (transfer none) (nullable): the fence pending on @mem, valid
 * until the fence is replaced or @mem freed.
 */
NpuFence *
gst_npu_memory_get_fence (GstMemory * mem)
{
  NpuFence *fence;

  g_return_val_if_fail (mem != NULL, NULL);

  /* Only NPU memory carries a fence (and before any exists, the quark
   * is not even registered). */
  if (!gst_is_npu_memory (mem))
    return NULL;
  g_mutex_lock (&fence_lock);
  fence = gst_mini_object_get_qdata (GST_MINI_OBJECT (root_memory (mem)),
      fence_quark);
  g_mutex_unlock (&fence_lock);
  return fence;
}

/**
 * gst_npu_memory_wait:
 * @timeout_us: microseconds, or -1 for ever
 *
 * Waits for the fence pending on @mem, if any.
 *
 * Returns: %TRUE when @mem holds its data.
 */
gboolean
gst_npu_memory_wait (GstMemory * mem, gint64 timeout_us, GError ** error)
{
  NpuFence *fence;
  gboolean ok;

  g_return_val_if_fail (mem != NULL, FALSE);

  /* Referenced: the producer may replace the fence while we wait. */
  fence = memory_ref_fence (mem);
  if (!fence)
    return TRUE;
  ok = npu_fence_wait (fence, timeout_us, error);
  npu_fence_unref (fence);
  return ok;
}

static void
dmabuf_sync (GstMemory * mem, guint64 flags)
{
  if (gst_is_dmabuf_memory (mem)
      && !gst_npu_dmabuf_sync (gst_fd_memory_get_fd (mem), flags))
    GST_WARNING_OBJECT (mem->allocator, "DMA_BUF_IOCTL_SYNC failed: %s",
        g_strerror (errno));
}

/**
 * gst_npu_memory_begin_cpu_write:
 * @mem: NPU memory that a backend task is about to fill
 *
 * For producers whose output is guarded by a fence: returns where @mem's
 * bytes are, for a task to write without holding a GstMemory map (a map
 * held by the task would make every consumer's map fail instead of wait).
 * Call it before the fence is set on @mem, and
 * gst_npu_memory_end_cpu_write() from the task when the data is written,
 * before its fence signals; the two bracket the write with
 * DMA_BUF_IOCTL_SYNC.
 *
 * Returns: (nullable): the memory's data, at its offset.
 */
guint8 *
gst_npu_memory_begin_cpu_write (GstMemory * mem)
{
  GstMapInfo info;
  guint8 *data;

  g_return_val_if_fail (gst_is_npu_memory (mem), NULL);

  /* NPU memory stays mapped, so the pointer outlives this map. */
  if (!gst_memory_map (mem, &info, GST_MAP_READWRITE))
    return NULL;
  data = info.data;
  gst_memory_unmap (mem, &info);
  dmabuf_sync (mem, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE);
  return data;
}

void
gst_npu_memory_end_cpu_write (GstMemory * mem)
{
  g_return_if_fail (gst_is_npu_memory (mem));

  dmabuf_sync (mem, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE);
}

static gpointer
npu_mem_map_full (GstMemory * mem, GstMapInfo * info, gsize maxsize)
{
  NpuAllocState *state = get_state (mem->allocator);
  GError *error = NULL;

  if (!gst_npu_memory_wait (mem, state->fence_timeout_us, &error)) {
    GST_ERROR_OBJECT (mem->allocator, "not mapping memory %p: its data is "
        "not there: %s", mem, error->message);
    g_error_free (error);
    return NULL;
  }
  if (state->parent_map_full)
    return state->parent_map_full (mem, info, maxsize);
  return mem->allocator->mem_map (mem, maxsize, info->flags);
}

static void
npu_mem_unmap_full (GstMemory * mem, GstMapInfo * info)
{
  NpuAllocState *state = get_state (mem->allocator);

  if (state->parent_unmap_full)
    state->parent_unmap_full (mem, info);
  else
    mem->allocator->mem_unmap (mem);
}

/* ------------------------------------------------------------------------
 * GObject plumbing shared by the two types
 */
static void
state_init (GstAllocator * alloc, NpuAllocState * state)
{
  state->device_fd = -1;
  state->fence_timeout_us = gst_npu_fence_timeout_us ();
  /* The parents' map functions (the dma-buf one adds DMA_BUF_IOCTL_SYNC
   * around CPU access) run after the fence wait. */
  state->parent_map_full = alloc->mem_map_full;
  state->parent_unmap_full = alloc->mem_unmap_full;
  alloc->mem_map_full = npu_mem_map_full;
  alloc->mem_unmap_full = npu_mem_unmap_full;
  /* An ordinary alloc() works, so anyone given the allocator may use it. */
  GST_OBJECT_FLAG_UNSET (alloc, GST_ALLOCATOR_FLAG_CUSTOM_ALLOC);
}

static void
state_finalize (NpuAllocState * state)
{
  if (state->device_fd >= 0)
    close (state->device_fd);
  g_free (state->heap);
  g_free (state->device);
}

static void
npu_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  NpuAllocState *state = get_state (GST_ALLOCATOR (object));

  switch (prop_id) {
    case PROP_HEAP:
      g_value_set_string (value, state->heap);
      break;
    case PROP_PATH:
      g_value_set_enum (value, state->path);
      break;
    case PROP_DEVICE:
      g_value_set_string (value, state->device);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
install_properties (GObjectClass * gobject_class)
{
  gobject_class->get_property = npu_get_property;

  /**
   * GstNpuAllocator:heap:
   *
   * The DMA-BUF heap asked for: a name under /dev/dma_heap or a path.
   */
  g_object_class_install_property (gobject_class, PROP_HEAP,
      g_param_spec_string ("heap", "Heap", "DMA-BUF heap asked for", NULL,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  /**
   * GstNpuAllocator:memory-path:
   *
   * Which kind of memory this allocator hands out.
   */
  g_object_class_install_property (gobject_class, PROP_PATH,
      g_param_spec_enum ("memory-path", "Memory path",
          "Which kind of memory is in use", GST_TYPE_NPU_MEMORY_PATH,
          GST_NPU_MEMORY_PATH_MEMFD,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  /**
   * GstNpuAllocator:device:
   *
   * The heap or udmabuf node in use, or "memfd".
   */
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device", "Node memory comes from",
          NULL, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

static void
gst_npu_dmabuf_allocator_finalize (GObject * object)
{
  state_finalize (&((GstNpuDmaBufAllocator *) object)->state);
  G_OBJECT_CLASS (gst_npu_dmabuf_allocator_parent_class)->finalize (object);
}

static void
gst_npu_fd_allocator_finalize (GObject * object)
{
  state_finalize (&((GstNpuFdAllocator *) object)->state);
  G_OBJECT_CLASS (gst_npu_fd_allocator_parent_class)->finalize (object);
}

static void
class_init_common (void)
{
  if (!fence_quark) {
    fence_quark = g_quark_from_static_string ("GstNpuMemoryFence");
    GST_DEBUG_CATEGORY_INIT (gst_npu_allocator_debug, "npuallocator", 0,
        "NPU memory allocator");
  }
}

static void
gst_npu_dmabuf_allocator_class_init (GstNpuDmaBufAllocatorClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  class_init_common ();
  gobject_class->finalize = gst_npu_dmabuf_allocator_finalize;
  install_properties (gobject_class);
  GST_ALLOCATOR_CLASS (klass)->alloc = npu_alloc;
}

static void
gst_npu_dmabuf_allocator_init (GstNpuDmaBufAllocator * self)
{
  state_init (GST_ALLOCATOR (self), &self->state);
}

static void
gst_npu_fd_allocator_class_init (GstNpuFdAllocatorClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  class_init_common ();
  gobject_class->finalize = gst_npu_fd_allocator_finalize;
  install_properties (gobject_class);
  GST_ALLOCATOR_CLASS (klass)->alloc = npu_alloc;
}

static void
gst_npu_fd_allocator_init (GstNpuFdAllocator * self)
{
  state_init (GST_ALLOCATOR (self), &self->state);
}

/* ------------------------------------------------------------------------
 * Public constructors
 */

/**
 * gst_npu_allocator_new:
 * @heap: (nullable): a DMA-BUF heap name or path; %NULL for the
 *   GST_NPU_DMA_HEAP environment variable or "system"
 *
 * Probes the memory sources in order and returns an allocator for the first
 * that works.  Which one it is is logged (category "npuallocator") and
 * given by gst_npu_allocator_get_path().
 *
 * Returns: (transfer full): a new NPU allocator.
 */
GstAllocator *
gst_npu_allocator_new (const gchar * heap)
{
  NpuAllocState probed = { 0, };
  GstAllocator *alloc;
  NpuAllocState *state;

  g_type_class_unref (g_type_class_ref (GST_TYPE_NPU_FD_ALLOCATOR));

  if (probe (heap, &probed))
    alloc = g_object_new (GST_TYPE_NPU_DMABUF_ALLOCATOR, NULL);
  else
    alloc = g_object_new (GST_TYPE_NPU_FD_ALLOCATOR, NULL);
  gst_object_ref_sink (alloc);

  state = get_state (alloc);
  state->path = probed.path;
  state->heap = probed.heap;
  state->device = probed.device;
  state->device_fd = probed.device_fd;

  GST_INFO_OBJECT (alloc, "NPU memory from %s (%s)%s",
      gst_npu_memory_path_to_string (state->path), state->device,
      state->path == GST_NPU_MEMORY_PATH_MEMFD ?
      ": no DMA-BUF heap or udmabuf available, memory is not a dma-buf" : "");
  return alloc;
}

/**
 * gst_npu_allocator_get_default:
 *
 * Returns: (transfer full): the process's shared NPU allocator, probed
 * once, registered with GStreamer as "NpuMemory".
 */
GstAllocator *
gst_npu_allocator_get_default (void)
{
  static GstAllocator *shared = NULL;
  static gsize once = 0;

  if (g_once_init_enter (&once)) {
    shared = gst_npu_allocator_new (NULL);
    gst_allocator_register (GST_ALLOCATOR_NPU, gst_object_ref (shared));
    g_once_init_leave (&once, 1);
  }
  return gst_object_ref (shared);
}

GstNpuMemoryPath
gst_npu_allocator_get_path (GstAllocator * allocator)
{
  g_return_val_if_fail (gst_is_npu_allocator (allocator),
      GST_NPU_MEMORY_PATH_MEMFD);

  return get_state (allocator)->path;
}

/**
 * gst_npu_allocator_get_device:
 *
 * Returns: the heap or udmabuf node in use, or "memfd".
 */
const gchar *
gst_npu_allocator_get_device (GstAllocator * allocator)
{
  g_return_val_if_fail (gst_is_npu_allocator (allocator), NULL);

  return get_state (allocator)->device;
}
