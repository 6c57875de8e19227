/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: device-owned buffers (core/device/npubuffer.h): allocation, fd
 * and host imports against the bytes written through the fd or the array
 * itself, and every failure by its message. */
#include <core/device/npubuffer.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

static guint8
pattern (gsize i)
{
  return (guint8) (i * 7 + 3);
}

/* A memfd of @size bytes of pattern() */
static int
pattern_memfd (gsize size)
{
  int fd = memfd_create ("npu-test-buffer", MFD_CLOEXEC);
  guint8 *bytes = g_malloc (size);
  gsize i;

  g_assert_cmpint (fd, >=, 0);
  for (i = 0; i < size; i++)
    bytes[i] = pattern (i);
  g_assert_cmpint (pwrite (fd, bytes, size, 0), ==, (gssize) size);
  g_free (bytes);
  return fd;
}

static void
test_new (void)
{
  NpuDevice *dev = npu_device_open ("cpu", 1, NULL);
  GError *error = NULL;
  NpuBuffer *buf = npu_buffer_new (dev, 10000, &error);
  guint8 *p;
  gsize i;

  g_assert_no_error (error);
  g_assert_true (npu_buffer_get_device (buf) == dev);
  g_assert_cmpuint (npu_buffer_get_size (buf), ==, 10000);
  g_assert_false (npu_buffer_is_read_only (buf));
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ | NPU_BUFFER_MAP_WRITE, &error);
  g_assert_no_error (error);
  for (i = 0; i < 10000; i++)
    g_assert_cmpuint (p[i], ==, 0);
  memset (p, 0xa5, 10000);
  npu_buffer_unmap (buf);
  /* maps nest, and see what was written */
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ, &error);
  g_assert_true (npu_buffer_map (buf, NPU_BUFFER_MAP_READ, &error) == p);
  g_assert_cmpuint (p[9999], ==, 0xa5);
  npu_buffer_unmap (buf);
  npu_buffer_unmap (buf);
  /* the buffer holds the device: it outlives the caller's reference */
  npu_device_unref (dev);
  g_assert_cmpuint (npu_device_get_n_threads (npu_buffer_get_device (buf)),
      ==, 1);
  npu_buffer_unref (buf);

  dev = npu_device_open ("cpu", 1, NULL);
  g_assert_null (npu_buffer_new (dev, 0, &error));
  g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, "Cannot allocate an empty buffer");
  g_clear_error (&error);
  npu_device_unref (dev);
}

/* A range at an offset that is not page-aligned: its bytes are the fd's,
 * writes reach the fd, and the buffer outlives the caller's fd. */
static void
test_import_fd (void)
{
  gsize page = sysconf (_SC_PAGESIZE), total = 3 * page + 100;
  gsize offset = page + 13, size = 2 * page;
  NpuDevice *dev = npu_device_open ("cpu", 1, NULL);
  int fd = pattern_memfd (total);
  GError *error = NULL;
  NpuBuffer *buf = npu_buffer_import_fd (dev, fd, offset, size, &error);
  guint8 *p, back[4];
  gsize i;

  g_assert_no_error (error);
  g_assert_cmpuint (npu_buffer_get_size (buf), ==, size);
  g_assert_false (npu_buffer_is_read_only (buf));
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ | NPU_BUFFER_MAP_WRITE, &error);
  g_assert_no_error (error);
  for (i = 0; i < size; i++)
    g_assert_cmpuint (p[i], ==, pattern (offset + i));
  memcpy (p + size - 4, "npu!", 4);
  npu_buffer_unmap (buf);
  g_assert_cmpint (pread (fd, back, 4, offset + size - 4), ==, 4);
  g_assert_cmpint (memcmp (back, "npu!", 4), ==, 0);
  /* the byte after the range is untouched */
  g_assert_cmpint (pread (fd, back, 1, offset + size), ==, 1);
  g_assert_cmpuint (back[0], ==, pattern (offset + size));

  close (fd);
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ, &error);
  g_assert_cmpuint (p[0], ==, pattern (offset));
  npu_buffer_unmap (buf);
  npu_buffer_unref (buf);

  /* the whole fd, and its last byte alone */
  fd = pattern_memfd (total);
  buf = npu_buffer_import_fd (dev, fd, 0, total, &error);
  g_assert_no_error (error);
  npu_buffer_unref (buf);
  buf = npu_buffer_import_fd (dev, fd, total - 1, 1, &error);
  g_assert_no_error (error);
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ, &error);
  g_assert_cmpuint (p[0], ==, pattern (total - 1));
  npu_buffer_unmap (buf);
  npu_buffer_unref (buf);
  close (fd);
  npu_device_unref (dev);
}

static void
expect_import_error (NpuDevice * dev, int fd, gsize offset, gsize size,
    const gchar * message)
{
  GError *error = NULL;

  g_assert_null (npu_buffer_import_fd (dev, fd, offset, size, &error));
  g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, message);
  g_error_free (error);
}

static void
test_import_fd_errors (void)
{
  NpuDevice *dev = npu_device_open ("cpu", 1, NULL);
  int fd = pattern_memfd (1000), unused = 1000;
  gchar *msg;

  while (fcntl (unused, F_GETFD) >= 0)
    unused++;
  expect_import_error (dev, -1, 0, 1, "Cannot import fd -1: Bad file "
      "descriptor");
  msg = g_strdup_printf ("Cannot import fd %d: Bad file descriptor", unused);
  expect_import_error (dev, unused, 0, 1, msg);
  g_free (msg);

#define RANGE_ERROR(o, s) G_STMT_START { \
    msg = g_strdup_printf ("Cannot import fd %d: bytes %" G_GSIZE_FORMAT \
        "..+%" G_GSIZE_FORMAT " are not a non-empty range within its 1000 " \
        "bytes", fd, (gsize) (o), (gsize) (s)); \
    expect_import_error (dev, fd, o, s, msg); \
    g_free (msg); \
  } G_STMT_END
  RANGE_ERROR (0, 0);           /* empty */
  RANGE_ERROR (1001, 1);        /* offset past the end */
  RANGE_ERROR (1000, 1);        /* offset at the end */
  RANGE_ERROR (990, 11);        /* one byte out */
  RANGE_ERROR (0, 1001);
  RANGE_ERROR (10, G_MAXSIZE);  /* would wrap round */
  RANGE_ERROR (G_MAXSIZE, 2);
#undef RANGE_ERROR
  close (fd);
  npu_device_unref (dev);
}

/* An fd opened read-only gives a read-only buffer */
static void
test_import_fd_read_only (void)
{
  NpuDevice *dev = npu_device_open ("cpu", 1, NULL);
  int fd = pattern_memfd (5000), ro;
  gchar *path = g_strdup_printf ("/proc/self/fd/%d", fd);
  GError *error = NULL;
  NpuBuffer *buf;
  guint8 *p;

  ro = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (ro, >=, 0);
  buf = npu_buffer_import_fd (dev, ro, 4096, 904, &error);
  g_assert_no_error (error);
  g_assert_true (npu_buffer_is_read_only (buf));
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (p[903], ==, pattern (4999));
  npu_buffer_unmap (buf);
  g_assert_null (npu_buffer_map (buf, NPU_BUFFER_MAP_WRITE, &error));
  g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==,
      "Cannot map a read-only buffer for writing");
  g_clear_error (&error);
  npu_buffer_unref (buf);
  close (ro);
  close (fd);
  g_free (path);
  npu_device_unref (dev);
}

static void
count_destroy (gpointer user_data)
{
  (*(guint *) user_data)++;
}

static void
test_import_host (void)
{
  NpuDevice *dev = npu_device_open ("cpu", 1, NULL);
  guint8 bytes[64];
  guint destroyed = 0;
  GError *error = NULL;
  NpuBuffer *buf;

  memset (bytes, 7, sizeof (bytes));
  buf = npu_buffer_import_host (dev, bytes, sizeof (bytes), FALSE,
      count_destroy, &destroyed, &error);
  g_assert_no_error (error);
  /* in place, not a copy */
  g_assert_true (npu_buffer_map (buf, NPU_BUFFER_MAP_WRITE, &error) == bytes);
  npu_buffer_unmap (buf);
  npu_buffer_ref (buf);
  npu_buffer_unref (buf);
  g_assert_cmpuint (destroyed, ==, 0);
  npu_buffer_unref (buf);
  g_assert_cmpuint (destroyed, ==, 1);

  buf = npu_buffer_import_host (dev, bytes, sizeof (bytes), TRUE, NULL, NULL,
      &error);
  g_assert_null (npu_buffer_map (buf, NPU_BUFFER_MAP_WRITE, &error));
  g_assert_cmpstr (error->message, ==,
      "Cannot map a read-only buffer for writing");
  g_clear_error (&error);
  npu_buffer_unref (buf);

  /* a failed import leaves the range to the caller: no destroy */
  g_assert_null (npu_buffer_import_host (dev, NULL, 8, FALSE, count_destroy,
          &destroyed, &error));
  g_assert_cmpstr (error->message, ==, "Cannot import an empty host range");
  g_clear_error (&error);
  g_assert_null (npu_buffer_import_host (dev, bytes, 0, FALSE, count_destroy,
          &destroyed, &error));
  g_assert_cmpstr (error->message, ==, "Cannot import an empty host range");
  g_clear_error (&error);
  g_assert_cmpuint (destroyed, ==, 1);
  npu_device_unref (dev);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/buffer/new", test_new);
  g_test_add_func ("/buffer/import-fd", test_import_fd);
  g_test_add_func ("/buffer/import-fd/errors", test_import_fd_errors);
  g_test_add_func ("/buffer/import-fd/read-only", test_import_fd_read_only);
  g_test_add_func ("/buffer/import-host", test_import_host);
  return g_test_run ();
}
