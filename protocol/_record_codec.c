/* Kafka's records (DefaultRecord, record format v2), compiled: the two per-record loops whose cost is per record.
 *
 * walk: the per-record walk of storage/log_validator.py (Kafka's LogValidator reading each DefaultRecord): on a
 * produce load of small records it is most of the broker's CPU in Python.
 *
 * walk(buf, pos, end, delta) is log_validator._python_walk (and the _check_headers and _varint it calls) byte
 * for byte: the same result, and the same exception with the same message for every input, which
 * tests/unit/test_record_walk.py holds. That includes reading where the Python reads: past `end` as far as the
 * buffer goes (IndexError only at the buffer's end, with the message the buffer type's own indexing gives), a
 * negative position counting from the buffer's end, and the attributes byte never read.
 *
 * Arguments must fit a C Py_ssize_t (positions) and long long (delta); larger ones raise OverflowError, where
 * the Python would index past any buffer. The buffer is read in place and must be contiguous bytes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define INT_MASK 0xFFFFFFFFull /* a varint as Java's int keeps it */
#define LONG_MASK 0xFFFFFFFFFFFFFFFFull

/* minikafka.protocol.record_batch.InvalidRecordError, the class the Python walk raises; set at import. */
static PyObject *InvalidRecordError;

typedef struct {
    const uint8_t *data;
    Py_ssize_t len;
    PyObject *owner; /* for the IndexError message, which differs by type */
} Buf;

/* Python's IndexError for `owner[i]` out of range, with the message its own indexing gives. */
static int
index_error(const Buf *b)
{
    if (PyByteArray_Check(b->owner))
        PyErr_SetString(PyExc_IndexError, "bytearray index out of range");
    else if (PyMemoryView_Check(b->owner))
        PyErr_SetString(PyExc_IndexError, "index out of bounds on dimension 1");
    else
        PyErr_SetString(PyExc_IndexError, "index out of range");
    return -1;
}

/* buf[i] as Python indexes it (a negative i counts from the end); -1 with IndexError set when out of range.
 * The unsigned compare takes the usual in-range index in one branch. */
static inline int
byte_at(const Buf *b, Py_ssize_t i)
{
    if ((size_t)i < (size_t)b->len)
        return b->data[i];
    if (i < 0 && i >= -b->len)
        return b->data[i + b->len];
    return index_error(b);
}

/* The raw (still zigzag-encoded) varint at *pos, at most max_bytes long, cut to `mask`; moves *pos past it.
 * Returns -1 with IndexError or InvalidRecordError set. The first byte is checked before the loop: most varints
 * in a record are one byte long. */
static inline int
read_varint(const Buf *b, Py_ssize_t *pos, int max_bytes, uint64_t mask, uint64_t *out)
{
    int c = byte_at(b, *pos);
    if (c < 0)
        return -1;
    if (c < 0x80) {
        *pos += 1;
        *out = (uint64_t)c;
        return 0;
    }
    uint64_t value = (uint64_t)(c & 0x7F);
    for (int i = 1; i < max_bytes; i++) {
        c = byte_at(b, *pos + i);
        if (c < 0)
            return -1;
        /* At i == 9 of a varlong only the lowest bit survives the shift, as the 64-bit mask keeps it. */
        value |= (uint64_t)(c & 0x7F) << (7 * i);
        if (c < 0x80) {
            *pos += i + 1;
            *out = value & mask;
            return 0;
        }
    }
    PyErr_Format(InvalidRecordError, "Found invalid record structure: a varint longer than %d bytes", max_bytes);
    return -1;
}

/* Zigzag decoding of a raw value of at most 64 bits. */
static inline long long
zigzag(uint64_t raw)
{
    return (long long)(raw >> 1) ^ -(long long)(raw & 1);
}

/* log_validator._check_headers: the headers at p must end exactly at record_end; their count is read even where
 * the record has no byte left for it, and bounded by what is left of the batch (end), as Kafka's DefaultRecord. */
static int
check_headers(const Buf *b, Py_ssize_t p, Py_ssize_t record_end, Py_ssize_t size, Py_ssize_t end)
{
    uint64_t raw;
    if (read_varint(b, &p, 5, INT_MASK, &raw) < 0)
        return -1;
    long long count = zigzag(raw);
    if (count < 0) {
        PyErr_Format(InvalidRecordError, "Found invalid number of record headers %lld", count);
        return -1;
    }
    if (count > (long long)(end - p)) {
        PyErr_Format(InvalidRecordError,
                     "Found invalid number of record headers. %lld is larger than the remaining size of the buffer",
                     count);
        return -1;
    }
    for (long long i = 0; i < count; i++) {
        if (read_varint(b, &p, 5, INT_MASK, &raw) < 0)
            return -1;
        long long key_size = zigzag(raw);
        if (key_size < 0) {
            PyErr_Format(InvalidRecordError, "Invalid negative header key size %lld", key_size);
            return -1;
        }
        p += (Py_ssize_t)key_size;
        if (read_varint(b, &p, 5, INT_MASK, &raw) < 0)
            return -1;
        if (!(raw & 1)) /* a negative value length is a null value */
            p += (Py_ssize_t)(raw >> 1);
        if (p > record_end)
            break;
    }
    if (p != record_end) {
        PyErr_Format(InvalidRecordError,
                     "Invalid record size: expected to read %zd bytes in record payload, but instead read %zd", size,
                     p - (record_end - size));
        return -1;
    }
    return 0;
}

/* The records in b[pos:end], the first with offset delta `delta`: see log_validator._python_walk. */
static PyObject *
walk_records(const Buf *b, Py_ssize_t pos, Py_ssize_t end, long long delta)
{
    const long long first = delta;
    long long next = delta; /* the offset delta the next record must have */
    long long low = LLONG_MAX, high = LLONG_MIN;
    Py_ssize_t keyless = 0;
    uint64_t raw;
    while (pos < end) {
        if (read_varint(b, &pos, 5, INT_MASK, &raw) < 0)
            return NULL;
        Py_ssize_t size = (Py_ssize_t)(raw >> 1);
        Py_ssize_t record_end = pos + size;
        if ((raw & 1) || !size || record_end > end) { /* an odd raw value is a negative size */
            PyErr_Format(InvalidRecordError,
                         "Invalid record size: expected %lld bytes in record payload, but the batch has %zd bytes "
                         "left", zigzag(raw), end - pos);
            return NULL;
        }
        Py_ssize_t p = pos + 1; /* after the attributes byte, which record format v2 leaves unused */
        if (read_varint(b, &p, 10, LONG_MASK, &raw) < 0)
            return NULL;
        long long t = zigzag(raw);
        if (t < low)
            low = t;
        if (t > high)
            high = t;
        if (read_varint(b, &p, 5, INT_MASK, &raw) < 0)
            return NULL;
        /* The Python compares the raw value with `next` zigzag-encoded, which no raw value equals when next < 0. */
        if ((raw & 1) || next < 0 || (long long)(raw >> 1) != next) {
            PyErr_Format(InvalidRecordError,
                         "Record %lld of the batch has offset delta %lld, expected %lld: offset deltas must run 0, "
                         "1, 2, ...", next - first, zigzag(raw), next);
            return NULL;
        }
        next++;
        if (read_varint(b, &p, 5, INT_MASK, &raw) < 0) /* key length; a negative one is a null key */
            return NULL;
        if (raw & 1)
            keyless++;
        else
            p += (Py_ssize_t)(raw >> 1);
        if (read_varint(b, &p, 5, INT_MASK, &raw) < 0) /* value length */
            return NULL;
        if (!(raw & 1))
            p += (Py_ssize_t)(raw >> 1);
        /* Anything but "no headers, and that was the last byte" goes through the headers' check. */
        int last = 0;
        if (p + 1 == record_end && (last = byte_at(b, p)) < 0)
            return NULL;
        if ((p + 1 != record_end || last) && check_headers(b, p, record_end, size, end) < 0)
            return NULL;
        pos = record_end;
    }
    PyObject *result = PyTuple_New(4); /* built directly: Py_BuildValue parses its format on every call */
    if (result == NULL)
        return NULL;
    PyObject *items[4] = {PyLong_FromLongLong(next - first), PyLong_FromLongLong(low), PyLong_FromLongLong(high),
                          PyLong_FromSsize_t(keyless)};
    for (int i = 0; i < 4; i++) {
        if (items[i] == NULL) {
            for (int j = i + 1; j < 4; j++)
                Py_XDECREF(items[j]);
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, i, items[i]);
    }
    return result;
}

/* args[1] and args[2] as the positions pos and end: -1 with the conversion's error set. */
static int
positions(PyObject *const *args, Py_ssize_t *pos, Py_ssize_t *end)
{
    *pos = PyLong_AsSsize_t(args[1]);
    if (*pos == -1 && PyErr_Occurred())
        return -1;
    *end = PyLong_AsSsize_t(args[2]);
    if (*end == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

static PyObject *
walk(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "walk() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *owner = args[0];
    if (!PyBytes_Check(owner) && !PyByteArray_Check(owner) && !PyMemoryView_Check(owner)) {
        PyErr_Format(PyExc_TypeError, "walk() needs bytes, bytearray or memoryview, not %.100s",
                     Py_TYPE(owner)->tp_name);
        return NULL;
    }
    Py_ssize_t pos, end;
    if (positions(args, &pos, &end) < 0)
        return NULL;
    long long delta = PyLong_AsLongLong(args[3]);
    if (delta == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(owner, &view, PyBUF_FORMAT | PyBUF_ND) < 0)
        return NULL;
    /* Python indexes a memoryview by its format: only unsigned bytes read as the walk reads them. */
    if (view.ndim > 1 || view.itemsize != 1 || (view.format != NULL && strcmp(view.format, "B") != 0)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "walk() needs a one-dimensional buffer of unsigned bytes");
        return NULL;
    }
    Buf b = {view.buf, view.len, owner};
    PyObject *result = walk_records(&b, pos, end, delta);
    PyBuffer_Release(&view);
    return result;
}

/* ---- RecordColumns: records decoded into Arrow-layout column buffers (protocol/record_columns.py) ----
 *
 * PythonRecordColumns in protocol/record_columns.py is the reference: the same buffers, and the same exception
 * with the same message for every input (tests/unit/test_record_columns.py holds it). An append first walks the
 * batch's records without writing (every check, what is kept, how many bytes), then reserves room and writes: a
 * corrupt batch leaves the columns as they were, and the writing pass cannot fail half way.
 *
 * Each output buffer is a bytearray kept at its capacity (grown by doubling) while `len` counts what is used, and
 * cut to `len` by take(), which hands the bytearrays over without another copy. */

/* minikafka.protocol.record_batch.CorruptRecordError, set at import. */
static PyObject *CorruptRecordError;

typedef struct {
    PyObject *bytes; /* a bytearray whose size is the capacity */
    Py_ssize_t len;
} Out;

static int
out_init(Out *o)
{
    o->len = 0;
    o->bytes = PyByteArray_FromStringAndSize(NULL, 0);
    return o->bytes == NULL ? -1 : 0;
}

/* Room for `extra` more bytes; new bytes are zeroed (bitmaps rely on it). */
static int
out_reserve(Out *o, Py_ssize_t extra)
{
    Py_ssize_t cap = PyByteArray_GET_SIZE(o->bytes);
    Py_ssize_t need = o->len + extra;
    if (need <= cap)
        return 0;
    Py_ssize_t grown = cap < 256 ? 256 : cap * 2;
    if (grown < need)
        grown = need;
    if (PyByteArray_Resize(o->bytes, grown) < 0)
        return -1;
    memset(PyByteArray_AS_STRING(o->bytes) + cap, 0, (size_t)(grown - cap));
    return 0;
}

static inline void
out_put(Out *o, const void *data, Py_ssize_t n)
{
    if (n > 0) {
        memcpy(PyByteArray_AS_STRING(o->bytes) + o->len, data, (size_t)n);
        o->len += n;
    }
}

static inline void
out_int32(Out *o, int32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    out_put(o, b, 4);
}

static inline void
out_int64(Out *o, int64_t value)
{
    uint64_t v = (uint64_t)value;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    out_put(o, b, 8);
}

/* Bit `index` of a bitmap whose bytes are already reserved and zeroed. */
static inline void
out_set_bit(Out *o, Py_ssize_t index)
{
    PyByteArray_AS_STRING(o->bytes)[index >> 3] |= (char)(1 << (index & 7));
}

/* The bytearray cut to what was written; a fresh empty buffer takes its place. */
static PyObject *
out_take(Out *o)
{
    if (PyByteArray_Resize(o->bytes, o->len) < 0)
        return NULL;
    PyObject *taken = o->bytes;
    if (out_init(o) < 0) {
        o->bytes = taken; /* keep the object consistent; the caller fails */
        return NULL;
    }
    return taken;
}

enum { K_OFFSETS, K_TIMESTAMPS, K_KEY_VALID, K_KEY_OFFSETS, K_KEY_DATA, K_VALUE_VALID, K_VALUE_OFFSETS, K_VALUE_DATA,
       K_HEADER_VALID, K_HEADER_OFFSETS, K_HKEY_OFFSETS, K_HKEY_DATA, K_HVALUE_VALID, K_HVALUE_OFFSETS,
       K_HVALUE_DATA, N_OUT };

typedef struct {
    PyObject_HEAD
    int include_headers;
    Py_ssize_t max_data_bytes;
    Py_ssize_t rows;
    Py_ssize_t header_entries;
    Out out[N_OUT];
} RecordColumns;

static int
columns_reset(RecordColumns *self)
{
    self->rows = 0;
    self->header_entries = 0;
    for (int i = 0; i < N_OUT; i++) {
        Py_CLEAR(self->out[i].bytes);
        if (out_init(&self->out[i]) < 0)
            return -1;
    }
    /* Arrow offsets start with 0; the header columns exist only with headers. */
    int starts[] = {K_KEY_OFFSETS, K_VALUE_OFFSETS, K_HEADER_OFFSETS, K_HKEY_OFFSETS, K_HVALUE_OFFSETS};
    for (int i = 0; i < 5; i++) {
        if (!self->include_headers && starts[i] >= K_HEADER_VALID)
            continue;
        if (out_reserve(&self->out[starts[i]], 4) < 0)
            return -1;
        out_int32(&self->out[starts[i]], 0);
    }
    return 0;
}

static Py_ssize_t
columns_data_bytes(const RecordColumns *self)
{
    return self->out[K_KEY_DATA].len + self->out[K_VALUE_DATA].len + self->out[K_HKEY_DATA].len +
           self->out[K_HVALUE_DATA].len;
}

static int
columns_init(RecordColumns *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"include_headers", "max_data_bytes", NULL};
    int include_headers;
    Py_ssize_t max_data_bytes = 0x7FFFFFFF;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "p|n", names, &include_headers, &max_data_bytes))
        return -1;
    self->include_headers = include_headers;
    self->max_data_bytes = max_data_bytes;
    return columns_reset(self);
}

static void
columns_dealloc(RecordColumns *self)
{
    for (int i = 0; i < N_OUT; i++)
        Py_CLEAR(self->out[i].bytes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The zigzag varint at *pos, which must end before `end`, as Java's int or long (`mask`). */
static inline int
bounded_varint(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, uint64_t mask, long long *out)
{
    uint64_t raw = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p + i >= end) {
            PyErr_Format(CorruptRecordError, "Record field at byte %zd runs past the end of its record", p);
            return -1;
        }
        uint8_t c = d[p + i];
        raw |= (uint64_t)(c & 0x7F) << (7 * i);
        if (c < 0x80) {
            *pos = p + i + 1;
            *out = zigzag(raw & mask); /* within Java's int range when masked to 32 bits */
            return 0;
        }
    }
    PyErr_Format(CorruptRecordError, "Found invalid record structure: a varint longer than %d bytes", max_bytes);
    return -1;
}

/* A length-prefixed field at *pos: *start and *length (-1 for null). */
static inline int
bounded_bytes(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, const char *what, Py_ssize_t *start,
              long long *length)
{
    if (bounded_varint(d, pos, end, 5, INT_MASK, length) < 0)
        return -1;
    if (*length == -1)
        return 0;
    if (*length < 0 || *length > end - *pos) {
        PyErr_Format(CorruptRecordError, "Record has a %s of %lld bytes, but %zd bytes are left", what, *length,
                     end - *pos);
        return -1;
    }
    *start = *pos;
    *pos += (Py_ssize_t)*length;
    return 0;
}

/* Whether s[0:n] is UTF-8 as Python's strict decoder accepts it (no overlongs, surrogates or values past
 * U+10FFFF). */
static int
valid_utf8(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        }
        else
            return 0;
        if (i + len > n)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

/* A header key as Java's new String(bytes, UTF_8) reads it, UTF-8 again: invalid sequences become U+FFFD, as
 * Python's "replace" error handler makes them. A new reference to bytes; NULL on error. */
static PyObject *
replaced_utf8(const uint8_t *s, Py_ssize_t n)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "replace");
    if (text == NULL)
        return NULL;
    PyObject *encoded = PyUnicode_AsUTF8String(text);
    Py_DECREF(text);
    return encoded;
}

typedef struct {
    Py_ssize_t rows, key_bytes, value_bytes, entries, hkey_bytes, hvalue_bytes;
} Sizes;

/* One pass over the records of d[pos:end]: every check, and (when `self` is given) the rows in range written.
 * The first pass (self NULL) fills `sizes`; the second writes into buffers already reserved from them. */
static int
decode_pass(RecordColumns *self, const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, long long count,
            long long base_offset, long long base_timestamp, int has_log_append_time, long long log_append_time,
            long long min_offset, long long max_offset, int headers, Sizes *sizes)
{
    for (long long index = 0; index < count; index++) {
        if (pos >= end) {
            PyErr_Format(CorruptRecordError, "Record batch ends after %lld of its %lld records", index, count);
            return -1;
        }
        long long size;
        if (bounded_varint(d, &pos, end, 5, INT_MASK, &size) < 0)
            return -1;
        if (size <= 0 || size > end - pos) {
            PyErr_Format(CorruptRecordError, "Record %lld of the batch has a size of %lld bytes, but %zd bytes are "
                         "left", index, size, end - pos);
            return -1;
        }
        Py_ssize_t record_end = pos + (Py_ssize_t)size;
        pos += 1; /* attributes: unused in record format v2 */
        long long timestamp_delta, offset_delta, key_length, value_length, header_count;
        Py_ssize_t key_start = 0, value_start = 0;
        if (bounded_varint(d, &pos, record_end, 10, LONG_MASK, &timestamp_delta) < 0 ||
            bounded_varint(d, &pos, record_end, 5, INT_MASK, &offset_delta) < 0 ||
            bounded_bytes(d, &pos, record_end, "key", &key_start, &key_length) < 0 ||
            bounded_bytes(d, &pos, record_end, "value", &value_start, &value_length) < 0 ||
            bounded_varint(d, &pos, record_end, 5, INT_MASK, &header_count) < 0)
            return -1;
        if (header_count < 0 || header_count > record_end - pos) {
            PyErr_Format(CorruptRecordError, "Record has an invalid number of headers: %lld", header_count);
            return -1;
        }
        long long offset = (long long)((uint64_t)base_offset + (uint64_t)offset_delta);
        int keep = offset >= min_offset && offset < max_offset;
        Py_ssize_t row = self != NULL ? self->rows : 0;
        if (keep && self != NULL) {
            out_int64(&self->out[K_OFFSETS], offset);
            out_int64(&self->out[K_TIMESTAMPS], has_log_append_time ? log_append_time
                                                 : (long long)((uint64_t)base_timestamp + (uint64_t)timestamp_delta));
            if (key_length >= 0) {
                out_set_bit(&self->out[K_KEY_VALID], row);
                out_put(&self->out[K_KEY_DATA], d + key_start, (Py_ssize_t)key_length);
            }
            out_int32(&self->out[K_KEY_OFFSETS], (int32_t)self->out[K_KEY_DATA].len);
            if (value_length >= 0) {
                out_set_bit(&self->out[K_VALUE_VALID], row);
                out_put(&self->out[K_VALUE_DATA], d + value_start, (Py_ssize_t)value_length);
            }
            out_int32(&self->out[K_VALUE_OFFSETS], (int32_t)self->out[K_VALUE_DATA].len);
        }
        else if (keep) {
            sizes->rows++;
            sizes->key_bytes += key_length > 0 ? (Py_ssize_t)key_length : 0;
            sizes->value_bytes += value_length > 0 ? (Py_ssize_t)value_length : 0;
        }
        for (long long h = 0; h < header_count; h++) {
            long long hkey_length, hvalue_length;
            Py_ssize_t hkey_start = 0, hvalue_start = 0;
            if (bounded_bytes(d, &pos, record_end, "header key", &hkey_start, &hkey_length) < 0)
                return -1;
            if (hkey_length < 0) {
                PyErr_SetString(CorruptRecordError, "Record has a header with a null key");
                return -1;
            }
            if (bounded_bytes(d, &pos, record_end, "header value", &hvalue_start, &hvalue_length) < 0)
                return -1;
            if (!(keep && headers))
                continue;
            const uint8_t *hkey = d + hkey_start;
            Py_ssize_t hkey_size = (Py_ssize_t)hkey_length;
            PyObject *replaced = NULL;
            if (!valid_utf8(hkey, hkey_size)) {
                replaced = replaced_utf8(hkey, hkey_size);
                if (replaced == NULL)
                    return -1;
                hkey = (const uint8_t *)PyBytes_AS_STRING(replaced);
                hkey_size = PyBytes_GET_SIZE(replaced);
            }
            if (self != NULL) {
                out_put(&self->out[K_HKEY_DATA], hkey, hkey_size);
                out_int32(&self->out[K_HKEY_OFFSETS], (int32_t)self->out[K_HKEY_DATA].len);
                if (hvalue_length >= 0) {
                    out_set_bit(&self->out[K_HVALUE_VALID], self->header_entries);
                    out_put(&self->out[K_HVALUE_DATA], d + hvalue_start, (Py_ssize_t)hvalue_length);
                }
                out_int32(&self->out[K_HVALUE_OFFSETS], (int32_t)self->out[K_HVALUE_DATA].len);
                self->header_entries++;
            }
            else {
                sizes->entries++;
                sizes->hkey_bytes += hkey_size;
                sizes->hvalue_bytes += hvalue_length > 0 ? (Py_ssize_t)hvalue_length : 0;
            }
            Py_XDECREF(replaced);
        }
        if (pos != record_end) {
            PyErr_Format(CorruptRecordError, "Record %lld of the batch has %zd bytes left after its last header",
                         index, record_end - pos);
            return -1;
        }
        if (keep && self != NULL) {
            if (headers) {
                if (header_count > 0)
                    out_set_bit(&self->out[K_HEADER_VALID], row);
                out_int32(&self->out[K_HEADER_OFFSETS], (int32_t)self->header_entries);
            }
            self->rows++;
        }
    }
    if (pos != end) {
        PyErr_Format(CorruptRecordError, "Record batch has %zd bytes after its %lld records", end - pos, count);
        return -1;
    }
    return 0;
}

/* Room for `sizes` more: bitmaps to the new row (or entry) count, offsets and values per row, data bytes. */
static int
columns_reserve(RecordColumns *self, const Sizes *sizes)
{
    Py_ssize_t rows = self->rows + sizes->rows, entries = self->header_entries + sizes->entries;
    Py_ssize_t want[N_OUT] = {0};
    want[K_OFFSETS] = want[K_TIMESTAMPS] = 8 * sizes->rows;
    want[K_KEY_OFFSETS] = want[K_VALUE_OFFSETS] = 4 * sizes->rows;
    want[K_KEY_VALID] = want[K_VALUE_VALID] = (rows + 7) / 8 - self->out[K_KEY_VALID].len;
    want[K_KEY_DATA] = sizes->key_bytes;
    want[K_VALUE_DATA] = sizes->value_bytes;
    if (self->include_headers) {
        want[K_HEADER_VALID] = (rows + 7) / 8 - self->out[K_HEADER_VALID].len;
        want[K_HEADER_OFFSETS] = 4 * sizes->rows;
        want[K_HKEY_OFFSETS] = want[K_HVALUE_OFFSETS] = 4 * sizes->entries;
        want[K_HVALUE_VALID] = (entries + 7) / 8 - self->out[K_HVALUE_VALID].len;
        want[K_HKEY_DATA] = sizes->hkey_bytes;
        want[K_HVALUE_DATA] = sizes->hvalue_bytes;
    }
    for (int i = 0; i < N_OUT; i++)
        if (out_reserve(&self->out[i], want[i]) < 0)
            return -1;
    /* Bitmaps grow to cover the new rows now: their bytes are set bit by bit below. */
    int bitmaps[] = {K_KEY_VALID, K_VALUE_VALID, K_HEADER_VALID, K_HVALUE_VALID};
    for (int i = 0; i < 4; i++)
        self->out[bitmaps[i]].len += want[bitmaps[i]];
    return 0;
}

static PyObject *
columns_append(RecordColumns *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "append() takes 9 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t pos, end;
    if (positions(args, &pos, &end) < 0)
        return NULL;
    long long values[6]; /* count, base offset, base timestamp, log append time, min offset, max offset */
    int has_log_append_time = args[6] != Py_None;
    for (int i = 0; i < 6; i++) {
        PyObject *arg = args[3 + i];
        if (i == 3 && !has_log_append_time) {
            values[i] = 0;
            continue;
        }
        values[i] = PyLong_AsLongLong(arg);
        if (values[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyErr_Format(PyExc_ValueError, "records [%zd, %zd) are not within the buffer's %zd bytes", pos, end,
                     view.len);
        goto done;
    }
    Sizes sizes = {0};
    int headers = self->include_headers;
    if (decode_pass(NULL, view.buf, pos, end, values[0], values[1], values[2], has_log_append_time, values[3],
                    values[4], values[5], headers, &sizes) < 0)
        goto done;
    Py_ssize_t grow = sizes.key_bytes + sizes.value_bytes + sizes.hkey_bytes + sizes.hvalue_bytes;
    if (columns_data_bytes(self) + grow > self->max_data_bytes) {
        PyErr_Format(PyExc_OverflowError, "decoded records would pass %zd bytes of column data: take() them first",
                     self->max_data_bytes);
        goto done;
    }
    if (columns_reserve(self, &sizes) < 0)
        goto done;
    Sizes unused = {0};
    if (decode_pass(self, view.buf, pos, end, values[0], values[1], values[2], has_log_append_time, values[3],
                    values[4], values[5], headers, &unused) < 0)
        goto done; /* only a failed UTF-8 replacement (memory) gets here */
    result = PyLong_FromSsize_t(sizes.rows);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
columns_take(RecordColumns *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *result = PyTuple_New(1 + N_OUT);
    if (result == NULL)
        return NULL;
    PyObject *rows = PyLong_FromSsize_t(self->rows);
    if (rows == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, rows);
    for (int i = 0; i < N_OUT; i++) {
        PyObject *taken = out_take(&self->out[i]);
        if (taken == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, 1 + i, taken);
    }
    if (columns_reset(self) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *
columns_rows(RecordColumns *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->rows);
}

static PyObject *
columns_get_data_bytes(RecordColumns *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(columns_data_bytes(self));
}

static PyMethodDef columns_methods[] = {
    {"append", (PyCFunction)(void (*)(void))columns_append, METH_FASTCALL,
     "append(buf, pos, end, count, base_offset, base_timestamp, log_append_time, min_offset, max_offset) -> kept"},
    {"take", (PyCFunction)columns_take, METH_NOARGS, "take() -> (rows, buffers...): everything since the last take"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef columns_getset[] = {
    {"rows", (getter)columns_rows, NULL, "rows decoded since the last take", NULL},
    {"data_bytes", (getter)columns_get_data_bytes, NULL, "key, value and header bytes since the last take", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecordColumnsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "minikafka.protocol._record_codec.RecordColumns",
    .tp_basicsize = sizeof(RecordColumns),
    .tp_dealloc = (destructor)columns_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "protocol/record_columns.PythonRecordColumns, compiled.",
    .tp_methods = columns_methods,
    .tp_getset = columns_getset,
    .tp_init = (initproc)columns_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(buf, pos, end, delta) -> (records, low timestamp delta, high timestamp delta, null keys)\n\n"
     "log_validator._python_walk, compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "minikafka.protocol._record_codec",
    "Kafka's records, compiled: the record walk of LogValidator (storage/log_validator.py holds the Python "
    "reference) and the decoder into columns (protocol/record_columns.py holds its reference).", -1,
    methods,
};

/* The project's classes, so that `except InvalidRecordError` (CorruptRecordError) catches what this raises. */
static PyObject *
record_batch_error(const char *name)
{
    PyObject *record_batch = PyImport_ImportModule("minikafka.protocol.record_batch");
    if (record_batch == NULL)
        return NULL;
    PyObject *error = PyObject_GetAttrString(record_batch, name);
    Py_DECREF(record_batch);
    return error;
}

PyMODINIT_FUNC
PyInit__record_codec(void)
{
    if (InvalidRecordError == NULL && (InvalidRecordError = record_batch_error("InvalidRecordError")) == NULL)
        return NULL;
    if (CorruptRecordError == NULL && (CorruptRecordError = record_batch_error("CorruptRecordError")) == NULL)
        return NULL;
    if (PyType_Ready(&RecordColumnsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RecordColumnsType);
    if (PyModule_AddObject(m, "RecordColumns", (PyObject *)&RecordColumnsType) < 0) {
        Py_DECREF(&RecordColumnsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
