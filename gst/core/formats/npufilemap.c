/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: opening a model file for reading in place */
#include "npufilemap.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

/**
 * npu_file_map:
 * @name: the file as error messages name it
 * @domain: @code: what errors are reported as
 * @fd: (out): the open fd, kept for the caller to close
 * @base: (out): the mapping, %NULL for an empty file (mmap of 0 bytes
 *   fails; the parsers report an empty file as truncated)
 * @size: (out): the file's size
 *
 * Returns: %TRUE on success; on failure nothing is left open or mapped.
 */
gboolean
npu_file_map (const gchar * path, const gchar * name, GQuark domain,
    gint code, int *fd, const guint8 ** base, gsize * size, GError ** error)
{
  struct stat st;
  void *map;
  int e;

  *fd = -1;
  *base = NULL;
  *size = 0;

  *fd = open (path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    e = errno;
    g_set_error (error, domain, code, "%s: cannot open: %s", name,
        g_strerror (e));
    return FALSE;
  }
  if (fstat (*fd, &st) < 0) {
    e = errno;
    g_set_error (error, domain, code, "%s: cannot stat: %s", name,
        g_strerror (e));
    goto fail;
  }
  if (!S_ISREG (st.st_mode)) {
    g_set_error (error, domain, code, "%s: not a regular file", name);
    goto fail;
  }
  if ((guint64) st.st_size > G_MAXSIZE) {
    g_set_error (error, domain, code, "%s: too large to map", name);
    goto fail;
  }
  *size = st.st_size;
  if (*size > 0) {
    map = mmap (NULL, *size, PROT_READ, MAP_SHARED, *fd, 0);
    if (map == MAP_FAILED) {
      e = errno;
      g_set_error (error, domain, code, "%s: cannot map %" G_GSIZE_FORMAT
          " bytes: %s", name, *size, g_strerror (e));
      goto fail;
    }
    *base = map;
  }
  return TRUE;

fail:
  close (*fd);
  *fd = -1;
  *size = 0;
  return FALSE;
}
