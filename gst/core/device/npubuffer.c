/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: device-owned buffers, the CPU device's implementation
 *
 * Only the CPU device exists, so its way is the only one: allocation is
 * page-aligned anonymous memory, an fd is mmapped (MAP_SHARED, so writes
 * reach whoever else maps it), a host range is used in place.
 */
#include "npubuffer.h"
#include "npubuffer-private.h"
#include "npubackend-private.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct _NpuBuffer
{
  gint ref_count;
  NpuDevice *device;
  gsize size;
  gboolean read_only;
  guint8 *data;                 /* the buffer's first byte */
  /* what to release: an mmap (fd or allocation) or a host range */
  gpointer map_base;
  gsize map_size;
  GDestroyNotify destroy;
  gpointer user_data;
  gint n_maps;
  /* another engine's buffer over the same bytes (a Vulkan buffer), and the
   * bytes copied to make it where it could not be imported in place */
  gpointer engine_buffer;
  gsize engine_offset;          /* where data lies in engine_buffer */
  gsize bytes_copied;
};

#if NPU_HAVE_VULKAN
static gboolean
is_vulkan (NpuDevice * device)
{
  return g_str_equal (npu_device_get_kind (device), "vulkan");
}
#endif

/* Gives a buffer over host bytes (an fd's mapping, a host range) its
 * engine buffer: those bytes imported in place where the engine can, else,
 * for a read-only buffer, a copy, counted; a writable buffer that cannot be
 * imported fails, as a copy would not see the host's later writes. */
static gboolean
attach_engine (NpuBuffer * buffer, GError ** error)
{
#if NPU_HAVE_VULKAN
  GError *import_error = NULL;
  gpointer copy;

  if (!is_vulkan (buffer->device))
    return TRUE;
  buffer->engine_buffer = npu_vulkan_buffer_import_host (buffer->device,
      buffer->data, buffer->size, &buffer->engine_offset, &import_error);
  if (buffer->engine_buffer)
    return TRUE;
  if (!buffer->read_only) {
    g_propagate_prefixed_error (error, import_error,
        "Cannot use %" G_GSIZE_FORMAT " bytes in place on %s: ", buffer->size,
        npu_device_get_name (buffer->device));
    return FALSE;
  }
  g_clear_error (&import_error);
  buffer->engine_buffer = npu_vulkan_buffer_new (buffer->device, buffer->size,
      &copy, error);
  if (!buffer->engine_buffer)
    return FALSE;
  memcpy (copy, buffer->data, buffer->size);
  buffer->engine_offset = 0;
  buffer->bytes_copied = buffer->size;
#endif
  return TRUE;
}

static NpuBuffer *
buffer_alloc (NpuDevice * device, gsize size)
{
  NpuBuffer *buffer = g_new0 (NpuBuffer, 1);

  buffer->ref_count = 1;
  buffer->device = npu_device_ref (device);
  buffer->size = size;
  return buffer;
}

/**
 * npu_buffer_new:
 * @device: the device
 * @size: bytes, > 0
 * @error: where a failure is reported
 *
 * Returns: (transfer full) (nullable): a zero-filled buffer
 */
NpuBuffer *
npu_buffer_new (NpuDevice * device, gsize size, GError ** error)
{
  NpuBuffer *buffer;
  gpointer mem;

  g_return_val_if_fail (device != NULL, NULL);
  if (size == 0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot allocate an empty buffer");
    return NULL;
  }
#if NPU_HAVE_VULKAN
  if (is_vulkan (device)) {
    gpointer engine_buffer = npu_vulkan_buffer_new (device, size, &mem, error);

    if (!engine_buffer)
      return NULL;
    buffer = buffer_alloc (device, size);
    buffer->data = mem;
    buffer->engine_buffer = engine_buffer;
    return buffer;
  }
#endif
  mem = mmap (NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
      -1, 0);
  if (mem == MAP_FAILED) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot allocate a buffer of %" G_GSIZE_FORMAT " bytes: %s", size,
        g_strerror (errno));
    return NULL;
  }
  buffer = buffer_alloc (device, size);
  buffer->data = buffer->map_base = mem;
  buffer->map_size = size;
  return buffer;
}

/* The size of what @fd refers to: st_size for a file or memfd; a dma-buf
 * reports its size through lseek (SEEK_END), its st_size may be 0. */
static gboolean
fd_size (int fd, guint64 * size, GError ** error)
{
  struct stat st;
  off_t end;

  if (fd < 0 || fstat (fd, &st) < 0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot import fd %d: %s", fd, g_strerror (fd < 0 ? EBADF : errno));
    return FALSE;
  }
  if (st.st_size > 0 || S_ISREG (st.st_mode)) {
    *size = st.st_size;
    return TRUE;
  }
  end = lseek (fd, 0, SEEK_END);
  if (end < 0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot import fd %d: its size is unknown: %s", fd, g_strerror (errno));
    return FALSE;
  }
  /* a dma-buf seeks to its end or its start only, and its position
   * means nothing to anyone */
  lseek (fd, 0, SEEK_SET);
  *size = end;
  return TRUE;
}

/**
 * npu_buffer_import_fd:
 * @device: the device
 * @fd: a dma-buf, memfd or file descriptor; not taken: the caller keeps it
 *   and may close it at once (the mapping holds the file)
 * @offset: the first byte of the range in @fd
 * @size: bytes of the range, > 0
 * @error: where a failure is reported
 *
 * Returns: (transfer full) (nullable): a buffer over the range, or NULL
 */
NpuBuffer *
npu_buffer_import_fd (NpuDevice * device, int fd, gsize offset, gsize size,
    GError ** error)
{
  NpuBuffer *buffer;
  guint64 total;
  gsize page = sysconf (_SC_PAGESIZE), skip = offset % page;
  gboolean read_only;
  gpointer mem;
  int flags;

  g_return_val_if_fail (device != NULL, NULL);
  if (!fd_size (fd, &total, error))
    return NULL;
  if (size == 0 || offset > total || size > total - offset) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot import fd %d: bytes %" G_GSIZE_FORMAT "..+%" G_GSIZE_FORMAT
        " are not a non-empty range within its %" G_GUINT64_FORMAT " bytes",
        fd, offset, size, total);
    return NULL;
  }
  flags = fcntl (fd, F_GETFL);
  read_only = flags < 0 || (flags & O_ACCMODE) == O_RDONLY;
  mem = mmap (NULL, skip + size, PROT_READ | (read_only ? 0 : PROT_WRITE),
      MAP_SHARED, fd, offset - skip);
  if (mem == MAP_FAILED) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot import fd %d: mmap failed: %s", fd, g_strerror (errno));
    return NULL;
  }
  buffer = buffer_alloc (device, size);
  buffer->map_base = mem;
  buffer->map_size = skip + size;
  buffer->data = (guint8 *) mem + skip;
  buffer->read_only = read_only;
  if (!attach_engine (buffer, error)) {
    npu_buffer_unref (buffer);
    return NULL;
  }
  return buffer;
}

/**
 * npu_buffer_import_host:
 * @device: the device
 * @data: the range's first byte
 * @size: bytes, > 0
 * @read_only: whether the host may map it for writing
 * @destroy: (nullable): called with @user_data when the buffer is freed
 * @user_data: for @destroy
 * @error: where a failure is reported
 *
 * On failure @destroy is not called: the range stays the caller's.
 *
 * Returns: (transfer full) (nullable): a buffer over the range, or NULL
 */
NpuBuffer *
npu_buffer_import_host (NpuDevice * device, gpointer data, gsize size,
    gboolean read_only, GDestroyNotify destroy, gpointer user_data,
    GError ** error)
{
  NpuBuffer *buffer;

  g_return_val_if_fail (device != NULL, NULL);
  if (data == NULL || size == 0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot import an empty host range");
    return NULL;
  }
  buffer = buffer_alloc (device, size);
  buffer->data = data;
  buffer->read_only = read_only;
  buffer->destroy = destroy;
  buffer->user_data = user_data;
  if (!attach_engine (buffer, error)) {
    /* the caller keeps its range on failure */
    buffer->destroy = NULL;
    npu_buffer_unref (buffer);
    return NULL;
  }
  return buffer;
}

NpuBuffer *
npu_buffer_ref (NpuBuffer * buffer)
{
  g_return_val_if_fail (buffer != NULL, NULL);
  g_atomic_int_inc (&buffer->ref_count);
  return buffer;
}

void
npu_buffer_unref (NpuBuffer * buffer)
{
  g_return_if_fail (buffer != NULL);
  if (!g_atomic_int_dec_and_test (&buffer->ref_count))
    return;
  if (buffer->n_maps != 0)
    g_critical ("NpuBuffer freed while mapped %d times", buffer->n_maps);
#if NPU_HAVE_VULKAN
  if (buffer->engine_buffer)
    npu_vulkan_buffer_free (buffer->engine_buffer);
#endif
  if (buffer->map_base)
    munmap (buffer->map_base, buffer->map_size);
  if (buffer->destroy)
    buffer->destroy (buffer->user_data);
  npu_device_unref (buffer->device);
  g_free (buffer);
}

gsize
npu_buffer_get_size (NpuBuffer * buffer)
{
  return buffer->size;
}

NpuDevice *
npu_buffer_get_device (NpuBuffer * buffer)
{
  return buffer->device;
}

gboolean
npu_buffer_is_read_only (NpuBuffer * buffer)
{
  return buffer->read_only;
}

/**
 * npu_buffer_map:
 * @buffer: the buffer
 * @flags: how the host will access it
 * @error: where a failure is reported
 *
 * Returns: (nullable): the buffer's first byte, or NULL
 */
gpointer
npu_buffer_map (NpuBuffer * buffer, NpuBufferMapFlags flags, GError ** error)
{
  g_return_val_if_fail (buffer != NULL, NULL);
  if ((flags & NPU_BUFFER_MAP_WRITE) && buffer->read_only) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "Cannot map a read-only buffer for writing");
    return NULL;
  }
  g_atomic_int_inc (&buffer->n_maps);
  return buffer->data;
}

void
npu_buffer_unmap (NpuBuffer * buffer)
{
  g_return_if_fail (buffer != NULL);
  g_return_if_fail (g_atomic_int_get (&buffer->n_maps) > 0);
  g_atomic_int_add (&buffer->n_maps, -1);
}

/**
 * npu_buffer_get_bytes_copied:
 *
 * Returns: the bytes copied to give @buffer's device its own copy, where
 * an fd or host range could not be imported in place (0 on the CPU and
 * wherever the import worked).
 */
gsize
npu_buffer_get_bytes_copied (NpuBuffer * buffer)
{
  return buffer->bytes_copied;
}

guint8 *
npu_buffer_get_data (NpuBuffer * buffer)
{
  return buffer->data;
}

gpointer
npu_buffer_get_engine_buffer (NpuBuffer * buffer, gsize * offset)
{
  *offset = buffer->engine_offset;
  return buffer->engine_buffer;
}
