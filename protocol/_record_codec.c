/* Kafka's records (DefaultRecord, record format v2), compiled: the loops whose cost is per record.
 *
 * walk: the per-record walk of storage/log_validator.py (Kafka's LogValidator reading each DefaultRecord): on a
 * produce load of small records it is most of the broker's CPU in Python.
 *
 * put_records, retained and rewrite: the log cleaner's walks over each record's key (storage/log_cleaner.py's
 * OffsetMap) and the re-encoding of the records a rewritten batch keeps, below the record columns decoder.
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
#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* TypeError unless a function `name` taking `expected` arguments was given that many. */
static int
expect_args(const char *name, Py_ssize_t nargs, Py_ssize_t expected)
{
    if (nargs == expected)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, expected, nargs);
    return -1;
}

static PyObject *
walk(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (expect_args("walk", nargs, 4) < 0)
        return NULL;
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
 * with the same message for every input (tests/unit/test_record_columns.py holds it).
 *
 * One pass per append, writing as it reads: reading each record twice (check, then write) cost a third of the
 * time on small records. Whatever stops an append (a corrupt record, the column data limit, memory) rolls the
 * columns back to where the append found them: lengths and counts are put back and the validity bits set since
 * are cleared. A row is written once its record has been read to its end, after the room for it is made, so
 * nothing fails half way through a row (header entries are written as they are read: a rollback takes them back).
 *
 * Each output buffer is a bytearray kept at its capacity (grown by doubling) while `len` counts what is used; take()
 * cuts it to `len` and hands it over without another copy. Bitmaps are zero beyond the bits set (new capacity is
 * zeroed, a rollback clears what it drops), so a row with a null needs no write and the last byte's unused bits are
 * zero as Arrow wants them. */

/* minikafka.protocol.record_batch.CorruptRecordError, set at import. */
static PyObject *CorruptRecordError;

typedef struct {
    PyObject *bytes; /* a bytearray whose size is the capacity */
    char *data;      /* its bytes, which move when it is resized */
    Py_ssize_t len;  /* bytes used; for a bitmap set only by take(), from the row or entry count */
    Py_ssize_t cap;
} Out;

static int
out_init(Out *o)
{
    o->bytes = PyByteArray_FromStringAndSize(NULL, 0);
    if (o->bytes == NULL)
        return -1;
    o->data = PyByteArray_AS_STRING(o->bytes);
    o->len = o->cap = 0;
    return 0;
}

/* A capacity of at least `need` bytes (doubling, so that appends cost amortized O(1) per byte); the new bytes are
 * zeroed when `zero` says so (bitmaps). */
static int
out_grow(Out *o, Py_ssize_t need, int zero)
{
    Py_ssize_t cap = o->cap < 128 ? 256 : o->cap * 2;
    if (cap < need)
        cap = need;
    if (PyByteArray_Resize(o->bytes, cap) < 0)
        return -1;
    o->data = PyByteArray_AS_STRING(o->bytes);
    if (zero)
        memset(o->data + o->cap, 0, (size_t)(cap - o->cap));
    o->cap = cap;
    return 0;
}

/* A capacity of at least `need` bytes. */
static inline int
out_ensure(Out *o, Py_ssize_t need, int zero)
{
    return need <= o->cap ? 0 : out_grow(o, need, zero);
}

/* Room for `extra` more bytes of data. */
static inline int
out_reserve(Out *o, Py_ssize_t extra)
{
    return o->len + extra <= o->cap ? 0 : out_grow(o, o->len + extra, 0);
}

static inline void
out_put(Out *o, const uint8_t *data, Py_ssize_t n)
{
    memcpy(o->data + o->len, data, (size_t)n);
    o->len += n;
}

/* Little-endian stores, whatever the host; compilers make each one store. */
static inline void
out_int32(Out *o, Py_ssize_t value)
{
    uint32_t v = (uint32_t)value;
    uint8_t *p = (uint8_t *)o->data + o->len;
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
    o->len += 4;
}

static inline void
out_int64(Out *o, long long value)
{
    uint64_t v = (uint64_t)value;
    uint8_t *p = (uint8_t *)o->data + o->len;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    o->len += 8;
}

static inline void
set_bit(Out *o, Py_ssize_t index)
{
    o->data[index >> 3] |= (char)(1 << (index & 7));
}

/* Bits [from, to) back to zero (a rollback). */
static void
clear_bits(Out *o, Py_ssize_t from, Py_ssize_t to)
{
    if (from >= to)
        return;
    Py_ssize_t first = from >> 3, last = (to - 1) >> 3;
    o->data[first] &= (char)((1 << (from & 7)) - 1);
    if (last > first)
        memset(o->data + first + 1, 0, (size_t)(last - first));
}

/* In ColumnBuffers' order, after `rows`. */
enum { K_OFFSETS, K_TIMESTAMPS, K_KEY_VALID, K_KEY_OFFSETS, K_KEY_DATA, K_VALUE_VALID, K_VALUE_OFFSETS, K_VALUE_DATA,
       K_HEADER_VALID, K_HEADER_OFFSETS, K_HKEY_OFFSETS, K_HKEY_DATA, K_HVALUE_VALID, K_HVALUE_OFFSETS,
       K_HVALUE_DATA, N_OUT };

typedef struct {
    PyObject_HEAD
    int include_headers;
    Py_ssize_t max_data_bytes;
    Py_ssize_t rows;
    Py_ssize_t entries;   /* header entries */
    Py_ssize_t row_cap;   /* rows the per-row buffers (fixed width, bitmaps) have room for */
    Py_ssize_t entry_cap; /* the same for the per-entry ones */
    Out out[N_OUT];
} RecordColumns;

/* Empty buffers for a RecordColumns (Arrow offsets start with a 0; the header columns exist only with headers);
 * -1 with nothing left allocated. */
static int
fresh_outs(Out *outs, int include_headers)
{
    for (int i = 0; i < N_OUT; i++) {
        if (out_init(&outs[i]) < 0) {
            for (int j = 0; j < i; j++)
                Py_DECREF(outs[j].bytes);
            return -1;
        }
    }
    int starts[] = {K_KEY_OFFSETS, K_VALUE_OFFSETS, K_HEADER_OFFSETS, K_HKEY_OFFSETS, K_HVALUE_OFFSETS};
    for (int i = 0; i < (include_headers ? 5 : 2); i++) {
        if (out_reserve(&outs[starts[i]], 4) < 0) {
            for (int j = 0; j < N_OUT; j++)
                Py_DECREF(outs[j].bytes);
            return -1;
        }
        out_int32(&outs[starts[i]], 0);
    }
    return 0;
}

/* The columns empty again, on buffers from fresh_outs. */
static void
columns_replace(RecordColumns *self, Out *outs)
{
    for (int i = 0; i < N_OUT; i++) {
        Py_XDECREF(self->out[i].bytes);
        self->out[i] = outs[i];
    }
    self->rows = self->entries = self->row_cap = self->entry_cap = 0;
}

/* Room for row `self->rows` in every per-row buffer, and for twice as many rows as now (amortized growth). */
static int
grow_rows(RecordColumns *self)
{
    Py_ssize_t rows = self->rows < 32 ? 64 : self->rows * 2;
    if (out_ensure(&self->out[K_OFFSETS], 8 * rows, 0) < 0 || out_ensure(&self->out[K_TIMESTAMPS], 8 * rows, 0) < 0 ||
        out_ensure(&self->out[K_KEY_OFFSETS], 4 * (rows + 1), 0) < 0 ||
        out_ensure(&self->out[K_VALUE_OFFSETS], 4 * (rows + 1), 0) < 0 ||
        out_ensure(&self->out[K_KEY_VALID], (rows + 7) / 8, 1) < 0 ||
        out_ensure(&self->out[K_VALUE_VALID], (rows + 7) / 8, 1) < 0)
        return -1;
    if (self->include_headers && (out_ensure(&self->out[K_HEADER_OFFSETS], 4 * (rows + 1), 0) < 0 ||
                                  out_ensure(&self->out[K_HEADER_VALID], (rows + 7) / 8, 1) < 0))
        return -1;
    self->row_cap = rows;
    return 0;
}

static int
grow_entries(RecordColumns *self)
{
    Py_ssize_t entries = self->entries < 32 ? 64 : self->entries * 2;
    if (out_ensure(&self->out[K_HKEY_OFFSETS], 4 * (entries + 1), 0) < 0 ||
        out_ensure(&self->out[K_HVALUE_OFFSETS], 4 * (entries + 1), 0) < 0 ||
        out_ensure(&self->out[K_HVALUE_VALID], (entries + 7) / 8, 1) < 0)
        return -1;
    self->entry_cap = entries;
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
    if (max_data_bytes < 0 || max_data_bytes > 0x7FFFFFFF) {
        PyErr_SetString(PyExc_ValueError, "max_data_bytes must be within [0, 2**31 - 1]: Arrow's offsets are int32");
        return -1;
    }
    Out outs[N_OUT];
    if (fresh_outs(outs, include_headers) < 0)
        return -1;
    self->include_headers = include_headers;
    self->max_data_bytes = max_data_bytes;
    columns_replace(self, outs);
    return 0;
}

/* A subclass's __init__ that does not call ours leaves no buffers. */
static int
uninitialized(const RecordColumns *self)
{
    if (self->out[0].bytes != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "RecordColumns.__init__() was not called");
    return 1;
}

static void
columns_dealloc(RecordColumns *self)
{
    for (int i = 0; i < N_OUT; i++)
        Py_CLEAR(self->out[i].bytes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The zigzag varint at *pos, which must end before `end`, as Java's int or long (`mask`). Most are one byte. */
static inline int
bounded_varint(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, uint64_t mask, long long *out)
{
    Py_ssize_t p = *pos;
    if (p < end && d[p] < 0x80) {
        *pos = p + 1;
        *out = zigzag(d[p]);
        return 0;
    }
    uint64_t raw = 0;
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

/* A record's fields before its headers (record format v2). */
typedef struct {
    Py_ssize_t end; /* where the record ends */
    long long timestamp_delta, offset_delta, key_length, value_length, header_count; /* lengths -1: null */
    Py_ssize_t key_start, value_start;
} RecordPrefix;

/* Record `index` of `count` read up to its headers and checked as record_columns._decode checks it: *pos is at its
 * size on entry, at its first header (or its end) on return. 0, or -1 with the error set. */
static int
read_record_prefix(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, long long index, long long count,
                   RecordPrefix *r)
{
    if (*pos >= end) {
        PyErr_Format(CorruptRecordError, "Record batch ends after %lld of its %lld records", index, count);
        return -1;
    }
    long long size;
    if (bounded_varint(d, pos, end, 5, INT_MASK, &size) < 0)
        return -1;
    if (size <= 0 || size > end - *pos) {
        PyErr_Format(CorruptRecordError, "Record %lld of the batch has a size of %lld bytes, but %zd bytes are "
                     "left", index, size, end - *pos);
        return -1;
    }
    r->end = *pos + (Py_ssize_t)size;
    *pos += 1; /* attributes: unused in record format v2 */
    r->key_start = r->value_start = 0;
    if (bounded_varint(d, pos, r->end, 10, LONG_MASK, &r->timestamp_delta) < 0 ||
        bounded_varint(d, pos, r->end, 5, INT_MASK, &r->offset_delta) < 0 ||
        bounded_bytes(d, pos, r->end, "key", &r->key_start, &r->key_length) < 0 ||
        bounded_bytes(d, pos, r->end, "value", &r->value_start, &r->value_length) < 0 ||
        bounded_varint(d, pos, r->end, 5, INT_MASK, &r->header_count) < 0)
        return -1;
    if (r->header_count < 0 || r->header_count > r->end - *pos) {
        PyErr_Format(CorruptRecordError, "Record has an invalid number of headers: %lld", r->header_count);
        return -1;
    }
    return 0;
}

/* One header of a record ending at record_end: its key (never null) and value. 0, or -1 with the error set. */
static int
read_header(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t record_end, Py_ssize_t *key_start, long long *key_length,
            Py_ssize_t *value_start, long long *value_length)
{
    *key_start = *value_start = 0;
    if (bounded_bytes(d, pos, record_end, "header key", key_start, key_length) < 0)
        return -1;
    if (*key_length < 0) {
        PyErr_SetString(CorruptRecordError, "Record has a header with a null key");
        return -1;
    }
    return bounded_bytes(d, pos, record_end, "header value", value_start, value_length);
}

/* One append's batch: the header fields the records need. */
typedef struct {
    long long count, base_offset, base_timestamp, log_append_time, min_offset, max_offset;
    int has_log_append_time;
} Batch;

/* Header entry `self->entries` written (the key already replaced where it was not UTF-8). -1 on memory. */
static int
put_header(RecordColumns *self, const uint8_t *key, Py_ssize_t key_size, const uint8_t *value,
           long long value_length)
{
    Py_ssize_t value_size = value_length > 0 ? (Py_ssize_t)value_length : 0;
    if ((self->entries >= self->entry_cap && grow_entries(self) < 0) ||
        out_reserve(&self->out[K_HKEY_DATA], key_size) < 0 || out_reserve(&self->out[K_HVALUE_DATA], value_size) < 0)
        return -1;
    out_put(&self->out[K_HKEY_DATA], key, key_size);
    out_int32(&self->out[K_HKEY_OFFSETS], self->out[K_HKEY_DATA].len);
    if (value_length >= 0)
        set_bit(&self->out[K_HVALUE_VALID], self->entries);
    out_put(&self->out[K_HVALUE_DATA], value, value_size);
    out_int32(&self->out[K_HVALUE_OFFSETS], self->out[K_HVALUE_DATA].len);
    self->entries++;
    return 0;
}

/* The records of d[pos:end] read and checked, those in range written. Returns how many were kept, or -1 with the
 * error set; *overflow is set (and writing stopped, reading not: a corrupt record later on still wins) when the
 * kept ones would pass max_data_bytes. The caller rolls back on -1 and on overflow. */
static Py_ssize_t
decode(RecordColumns *self, const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, const Batch *batch, int *overflow)
{
    const int headers = self->include_headers;
    Py_ssize_t kept = 0;
    Py_ssize_t data_bytes = columns_data_bytes(self);
    if (batch->count < 0) {
        PyErr_Format(CorruptRecordError, "Record batch has an invalid record count of %lld", batch->count);
        return -1;
    }
    for (long long index = 0; index < batch->count; index++) {
        RecordPrefix r;
        if (read_record_prefix(d, &pos, end, index, batch->count, &r) < 0)
            return -1;
        const Py_ssize_t record_end = r.end, key_start = r.key_start, value_start = r.value_start;
        const long long timestamp_delta = r.timestamp_delta, offset_delta = r.offset_delta,
                        key_length = r.key_length, value_length = r.value_length, header_count = r.header_count;
        /* Java's long arithmetic: wraps around. */
        long long offset = (long long)((uint64_t)batch->base_offset + (uint64_t)offset_delta);
        int keep = offset >= batch->min_offset && offset < batch->max_offset;
        kept += keep;
        Py_ssize_t key_size = key_length > 0 ? (Py_ssize_t)key_length : 0;
        Py_ssize_t value_size = value_length > 0 ? (Py_ssize_t)value_length : 0;
        int write = keep && !*overflow;
        if (write && (data_bytes += key_size + value_size) > self->max_data_bytes)
            *overflow = 1, write = 0;
        for (long long h = 0; h < header_count; h++) {
            long long hkey_length, hvalue_length;
            Py_ssize_t hkey_start, hvalue_start;
            if (read_header(d, &pos, record_end, &hkey_start, &hkey_length, &hvalue_start, &hvalue_length) < 0)
                return -1;
            if (!(write && headers))
                continue;
            /* Written before the record is read to its end: a rollback takes back the entries of a bad record. */
            const uint8_t *hkey = d + hkey_start;
            Py_ssize_t hkey_size = (Py_ssize_t)hkey_length;
            PyObject *replaced = NULL;
            if (!valid_utf8(hkey, hkey_size)) {
                if ((replaced = replaced_utf8(hkey, hkey_size)) == NULL)
                    return -1;
                hkey = (const uint8_t *)PyBytes_AS_STRING(replaced);
                hkey_size = PyBytes_GET_SIZE(replaced);
            }
            if ((data_bytes += hkey_size + (hvalue_length > 0 ? (Py_ssize_t)hvalue_length : 0)) >
                self->max_data_bytes)
                *overflow = 1, write = 0;
            else if (put_header(self, hkey, hkey_size, d + hvalue_start, hvalue_length) < 0) {
                Py_XDECREF(replaced);
                return -1;
            }
            Py_XDECREF(replaced);
        }
        if (pos != record_end) {
            PyErr_Format(CorruptRecordError, "Record %lld of the batch has %zd bytes left after its last header",
                         index, record_end - pos);
            return -1;
        }
        if (!write)
            continue;
        Py_ssize_t row = self->rows;
        if ((row >= self->row_cap && grow_rows(self) < 0) || out_reserve(&self->out[K_KEY_DATA], key_size) < 0 ||
            out_reserve(&self->out[K_VALUE_DATA], value_size) < 0)
            return -1;
        out_int64(&self->out[K_OFFSETS], offset);
        out_int64(&self->out[K_TIMESTAMPS],
                  batch->has_log_append_time ? batch->log_append_time
                                             : (long long)((uint64_t)batch->base_timestamp + (uint64_t)timestamp_delta));
        if (key_length >= 0)
            set_bit(&self->out[K_KEY_VALID], row);
        out_put(&self->out[K_KEY_DATA], d + key_start, key_size);
        out_int32(&self->out[K_KEY_OFFSETS], self->out[K_KEY_DATA].len);
        if (value_length >= 0)
            set_bit(&self->out[K_VALUE_VALID], row);
        out_put(&self->out[K_VALUE_DATA], d + value_start, value_size);
        out_int32(&self->out[K_VALUE_OFFSETS], self->out[K_VALUE_DATA].len);
        if (headers) {
            if (header_count > 0)
                set_bit(&self->out[K_HEADER_VALID], row);
            out_int32(&self->out[K_HEADER_OFFSETS], self->entries);
        }
        self->rows = row + 1;
    }
    if (pos != end) {
        PyErr_Format(CorruptRecordError, "Record batch has %zd bytes after its %lld records", end - pos,
                     batch->count);
        return -1;
    }
    return kept;
}

/* Where an append found the columns: what a rollback puts back. */
typedef struct {
    Py_ssize_t rows, entries, len[N_OUT];
} Mark;

static void
columns_mark(const RecordColumns *self, Mark *mark)
{
    mark->rows = self->rows;
    mark->entries = self->entries;
    for (int i = 0; i < N_OUT; i++)
        mark->len[i] = self->out[i].len;
}

static void
columns_rollback(RecordColumns *self, const Mark *mark)
{
    clear_bits(&self->out[K_KEY_VALID], mark->rows, self->rows);
    clear_bits(&self->out[K_VALUE_VALID], mark->rows, self->rows);
    if (self->include_headers)
        clear_bits(&self->out[K_HEADER_VALID], mark->rows, self->rows);
    clear_bits(&self->out[K_HVALUE_VALID], mark->entries, self->entries);
    self->rows = mark->rows;
    self->entries = mark->entries;
    for (int i = 0; i < N_OUT; i++)
        self->out[i].len = mark->len[i];
}

static PyObject *
columns_append(RecordColumns *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (uninitialized(self))
        return NULL;
    if (expect_args("append", nargs, 9) < 0)
        return NULL;
    Py_ssize_t pos, end;
    if (positions(args, &pos, &end) < 0)
        return NULL;
    Batch batch = {0};
    batch.has_log_append_time = args[6] != Py_None;
    long long *fields[] = {&batch.count, &batch.base_offset, &batch.base_timestamp, &batch.log_append_time,
                           &batch.min_offset, &batch.max_offset};
    for (int i = 0; i < 6; i++) {
        if (i == 3 && !batch.has_log_append_time)
            continue;
        *fields[i] = PyLong_AsLongLong(args[3 + i]);
        if (*fields[i] == -1 && PyErr_Occurred())
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
    Mark mark;
    columns_mark(self, &mark);
    int overflow = 0;
    Py_ssize_t kept = decode(self, view.buf, pos, end, &batch, &overflow);
    if (kept >= 0 && overflow)
        PyErr_Format(PyExc_OverflowError, "decoded records would pass %zd bytes of column data: take() them first",
                     self->max_data_bytes);
    if (kept < 0 || overflow)
        columns_rollback(self, &mark);
    else
        result = PyLong_FromSsize_t(kept);
done:
    PyBuffer_Release(&view);
    return result;
}

/* Everything since the last take; nothing changes unless it all succeeds. The new buffers are made first, then the
 * old ones cut to their length (cutting can only fail for memory, leaving each buffer whole and its capacity its
 * length), then handed over. */
static PyObject *
columns_take(RecordColumns *self, PyObject *Py_UNUSED(ignored))
{
    if (uninitialized(self))
        return NULL;
    PyObject *result = PyTuple_New(1 + N_OUT);
    if (result == NULL)
        return NULL;
    PyObject *rows = PyLong_FromSsize_t(self->rows);
    if (rows == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, rows);
    Out outs[N_OUT];
    if (fresh_outs(outs, self->include_headers) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    /* The bitmaps' lengths follow from the counts (none at all for header columns left out). Cut buffers have no
     * room for another row or entry: the next one grows them again. */
    self->row_cap = self->rows;
    self->entry_cap = self->entries;
    Py_ssize_t row_bytes = (self->rows + 7) / 8;
    self->out[K_KEY_VALID].len = self->out[K_VALUE_VALID].len = row_bytes;
    self->out[K_HEADER_VALID].len = self->include_headers ? row_bytes : 0;
    self->out[K_HVALUE_VALID].len = (self->entries + 7) / 8;
    for (int i = 0; i < N_OUT; i++) {
        Out *o = &self->out[i];
        if (PyByteArray_Resize(o->bytes, o->len) < 0) {
            for (int j = 0; j < N_OUT; j++)
                Py_DECREF(outs[j].bytes);
            Py_DECREF(result);
            return NULL;
        }
        o->data = PyByteArray_AS_STRING(o->bytes);
        o->cap = o->len;
    }
    for (int i = 0; i < N_OUT; i++) {
        PyTuple_SET_ITEM(result, 1 + i, self->out[i].bytes);
        self->out[i].bytes = NULL; /* the tuple's now */
    }
    columns_replace(self, outs);
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

/* ---- The log cleaner's per-record work (storage/log_cleaner.py's OffsetMap) ----
 *
 * Kafka's SkimpyOffsetMap keys its slots by the MD5 digest of a record's key. A cleaning hashes every keyed record
 * twice (once to map its offset, once to look it up when its segment is rewritten): the records are read, hashed
 * and looked up here, in the caller's dict of digest -> offset, without a Python object per record but the map's.
 * The Python reference is in storage/log_cleaner.py (_python_put_records, _python_retained), which reads records as
 * protocol/record_columns._decode does: both raise CorruptRecordError for the same records. */

/* MD5 (RFC 1321) of a key: 16 bytes. */
static uint32_t md5_k[64];
static const uint8_t md5_s[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                  5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void
md5_init_constants(void)
{
    for (int i = 0; i < 64; i++)
        md5_k[i] = (uint32_t)(uint64_t)floor(fabs(sin((double)(i + 1))) * 4294967296.0);
}

static void
md5_block(uint32_t state[4], const uint8_t *block)
{
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)block[4 * i] | (uint32_t)block[4 * i + 1] << 8 | (uint32_t)block[4 * i + 2] << 16 |
               (uint32_t)block[4 * i + 3] << 24;
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16)
            f = (b & c) | (~b & d), g = i;
        else if (i < 32)
            f = (d & b) | (~d & c), g = (5 * i + 1) & 15;
        else if (i < 48)
            f = b ^ c ^ d, g = (3 * i + 5) & 15;
        else
            f = c ^ (b | ~d), g = (7 * i) & 15;
        f += a + md5_k[i] + m[g];
        a = d;
        d = c;
        c = b;
        b += (f << md5_s[i]) | (f >> (32 - md5_s[i]));
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
}

static void
md5(const uint8_t *data, Py_ssize_t n, uint8_t out[16])
{
    uint32_t state[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    uint8_t tail[128];
    Py_ssize_t whole = n & ~(Py_ssize_t)63;
    for (Py_ssize_t i = 0; i < whole; i += 64)
        md5_block(state, data + i);
    Py_ssize_t rest = n - whole;
    memcpy(tail, data + whole, (size_t)rest);
    tail[rest] = 0x80;
    Py_ssize_t padded = rest < 56 ? 64 : 128;
    memset(tail + rest + 1, 0, (size_t)(padded - rest - 1));
    uint64_t bits = (uint64_t)n << 3;
    for (int i = 0; i < 8; i++)
        tail[padded - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(state, tail);
    if (padded == 128)
        md5_block(state, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(state[i] >> (8 * j));
}

/* What the cleaner needs of a record. */
typedef struct {
    long long offset;
    Py_ssize_t key_start;
    long long key_length; /* -1: null */
    int null_value;
} KeyedRecord;

/* The `count` records of d[pos:end] read and checked as record_columns._decode reads them (the same records raise
 * CorruptRecordError), into `out`, which has room for min(count, end - pos) of them (a record takes 2 bytes at
 * least). Offsets are base_offset + offset delta, wrapping around as Java's long. 0, or -1 with the error set. */
static int
scan_keyed(const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, long long count, long long base_offset,
           KeyedRecord *out)
{
    if (count < 0) {
        PyErr_Format(CorruptRecordError, "Record batch has an invalid record count of %lld", count);
        return -1;
    }
    for (long long index = 0; index < count; index++) {
        RecordPrefix r;
        if (read_record_prefix(d, &pos, end, index, count, &r) < 0)
            return -1;
        for (long long h = 0; h < r.header_count; h++) {
            long long hkey_length, hvalue_length;
            Py_ssize_t hkey_start, hvalue_start;
            if (read_header(d, &pos, r.end, &hkey_start, &hkey_length, &hvalue_start, &hvalue_length) < 0)
                return -1;
        }
        if (pos != r.end) {
            PyErr_Format(CorruptRecordError, "Record %lld of the batch has %zd bytes left after its last header",
                         index, r.end - pos);
            return -1;
        }
        out[index].offset = (long long)((uint64_t)base_offset + (uint64_t)r.offset_delta);
        out[index].key_start = r.key_start;
        out[index].key_length = r.key_length;
        out[index].null_value = r.value_length < 0;
    }
    if (pos != end) {
        PyErr_Format(CorruptRecordError, "Record batch has %zd bytes after its %lld records", end - pos, count);
        return -1;
    }
    return 0;
}

/* The buffer and records of a cleaner call's arguments (buf, pos, end, count, base_offset, ...): `view` taken of
 * buf and its records scanned into a new array, with *count set; the caller frees the array (PyMem_Free) and releases
 * the view. NULL with the error set and nothing held. */
static KeyedRecord *
scan_arguments(PyObject *const *args, Py_buffer *view, long long *count)
{
    Py_ssize_t pos, end;
    if (positions(args, &pos, &end) < 0)
        return NULL;
    *count = PyLong_AsLongLong(args[3]);
    if (*count == -1 && PyErr_Occurred())
        return NULL;
    long long base_offset = PyLong_AsLongLong(args[4]);
    if (base_offset == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || end > view->len || pos > end) {
        PyErr_Format(PyExc_ValueError, "records at [%zd, %zd) outside a buffer of %zd bytes", pos, end, view->len);
        PyBuffer_Release(view);
        return NULL;
    }
    long long room = *count < (long long)(end - pos) ? *count : (long long)(end - pos);
    KeyedRecord *records = PyMem_Malloc(sizeof(KeyedRecord) * (size_t)(room > 0 ? room : 1));
    if (records == NULL) {
        PyErr_NoMemory();
        PyBuffer_Release(view);
        return NULL;
    }
    if (scan_keyed((const uint8_t *)view->buf, pos, end, *count, base_offset, records) < 0) {
        PyMem_Free(records);
        PyBuffer_Release(view);
        return NULL;
    }
    return records;
}

static PyObject *
digest_of(const uint8_t *d, const KeyedRecord *r)
{
    uint8_t digest[16];
    md5(d + r->key_start, (Py_ssize_t)r->key_length, digest);
    return PyBytes_FromStringAndSize((const char *)digest, 16);
}

/* put_records(buf, pos, end, count, base_offset, start_offset, offsets, max_size) -> (full, last offset put or
 * None): log_cleaner._python_put_records, compiled. */
static PyObject *
put_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (expect_args("put_records", nargs, 8) < 0)
        return NULL;
    long long start_offset = PyLong_AsLongLong(args[5]);
    if (start_offset == -1 && PyErr_Occurred())
        return NULL;
    PyObject *offsets = args[6];
    if (!PyDict_Check(offsets)) {
        PyErr_SetString(PyExc_TypeError, "put_records() needs a dict of offsets");
        return NULL;
    }
    Py_ssize_t max_size = PyLong_AsSsize_t(args[7]);
    if (max_size == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    long long count;
    KeyedRecord *records = scan_arguments(args, &view, &count);
    if (records == NULL)
        return NULL;
    const uint8_t *d = (const uint8_t *)view.buf;
    int full = 0, any = 0;
    long long last = 0;
    for (long long i = 0; i < count; i++) {
        const KeyedRecord *r = &records[i];
        if (r->key_length < 0 || r->offset < start_offset)
            continue;
        if (PyDict_GET_SIZE(offsets) >= max_size) {
            full = 1;
            break;
        }
        PyObject *digest = digest_of(d, r);
        PyObject *offset = digest == NULL ? NULL : PyLong_FromLongLong(r->offset);
        int failed = offset == NULL || PyDict_SetItem(offsets, digest, offset) < 0;
        Py_XDECREF(digest);
        Py_XDECREF(offset);
        if (failed) {
            PyMem_Free(records);
            PyBuffer_Release(&view);
            return NULL;
        }
        last = r->offset, any = 1;
    }
    PyMem_Free(records);
    PyBuffer_Release(&view);
    if (any)
        return Py_BuildValue("(OL)", full ? Py_True : Py_False, last);
    return Py_BuildValue("(OO)", full ? Py_True : Py_False, Py_None);
}

/* retained(buf, pos, end, count, base_offset, offsets, latest_offset, keep_tombstones) -> (records kept, one byte
 * per record (1: kept), whether a kept one is a tombstone): log_cleaner._python_retained, compiled. */
static PyObject *
retained(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (expect_args("retained", nargs, 8) < 0)
        return NULL;
    PyObject *offsets = args[5];
    if (!PyDict_Check(offsets)) {
        PyErr_SetString(PyExc_TypeError, "retained() needs a dict of offsets");
        return NULL;
    }
    long long latest_offset = PyLong_AsLongLong(args[6]);
    if (latest_offset == -1 && PyErr_Occurred())
        return NULL;
    int keep_tombstones = PyObject_IsTrue(args[7]);
    if (keep_tombstones < 0)
        return NULL;
    Py_buffer view;
    long long count;
    KeyedRecord *records = scan_arguments(args, &view, &count);
    if (records == NULL)
        return NULL;
    const uint8_t *d = (const uint8_t *)view.buf;
    PyObject *flags = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count);
    if (flags == NULL)
        goto fail;
    char *kept = PyBytes_AS_STRING(flags);
    long long kept_count = 0;
    int tombstones = 0;
    for (long long i = 0; i < count; i++) {
        const KeyedRecord *r = &records[i];
        int keep;
        if (r->offset > latest_offset)
            keep = 1;
        else if (r->key_length < 0)
            keep = 0;
        else {
            PyObject *digest = digest_of(d, r);
            if (digest == NULL)
                goto fail;
            PyObject *found = PyDict_GetItemWithError(offsets, digest);
            Py_DECREF(digest);
            long long mapped = -1;
            if (found != NULL) {
                mapped = PyLong_AsLongLong(found);
                if (mapped == -1 && PyErr_Occurred())
                    goto fail;
            }
            else if (PyErr_Occurred())
                goto fail;
            keep = r->offset >= mapped && (!r->null_value || keep_tombstones);
        }
        kept[i] = (char)keep;
        kept_count += keep;
        tombstones |= keep && r->null_value;
    }
    PyMem_Free(records);
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(LNO)", kept_count, flags, tombstones ? Py_True : Py_False);
    return result;
fail:
    Py_XDECREF(flags);
    PyMem_Free(records);
    PyBuffer_Release(&view);
    return NULL;
}

/* A zigzag varint of a Java long at *w, as kafka-python's encode_varint writes it. */
static inline uint8_t *
put_varint(uint8_t *w, long long value)
{
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (raw > 0x7F) {
        *w++ = (uint8_t)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *w++ = (uint8_t)raw;
    return w;
}

static inline uint8_t *
put_field(uint8_t *w, const uint8_t *data, long long length)
{
    w = put_varint(w, length);
    if (length > 0) {
        memcpy(w, data, (size_t)length);
        w += length;
    }
    return w;
}

/* rewrite(buf, pos, end, count, flags, base_timestamp, log_append_time, horizon) -> (records, base timestamp, max
 * timestamp) or None: log_cleaner._python_rewrite, compiled. None where a timestamp leaves Java's long (the Python
 * then answers as it always has). */
static PyObject *
rewrite(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (expect_args("rewrite", nargs, 8) < 0)
        return NULL;
    Py_ssize_t pos, end;
    if (positions(args, &pos, &end) < 0)
        return NULL;
    long long count = PyLong_AsLongLong(args[3]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    long long batch_timestamp = PyLong_AsLongLong(args[5]);
    if (batch_timestamp == -1 && PyErr_Occurred())
        return NULL;
    int log_append = args[6] != Py_None, has_horizon = args[7] != Py_None;
    long long log_append_time = 0, horizon = 0;
    if (log_append && (log_append_time = PyLong_AsLongLong(args[6])) == -1 && PyErr_Occurred())
        return NULL;
    if (has_horizon && (horizon = PyLong_AsLongLong(args[7])) == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view, flag_view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[4], &flag_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *result = NULL;
    uint8_t *out = NULL, *body = NULL;
    if (pos < 0 || end > view.len || pos > end || count < 0 || count > end - pos || flag_view.len != count) {
        PyErr_SetString(PyExc_ValueError, "rewrite() needs the bounds, count and flags of a batch's records");
        goto done;
    }
    const uint8_t *d = (const uint8_t *)view.buf;
    const char *flags = (const char *)flag_view.buf;
    /* A record re-encoded grows by its timestamp delta (10 bytes at most), its length prefix and header keys made
     * valid UTF-8 (3 bytes for each invalid one). */
    size_t bound = 3 * (size_t)(end - pos) + 16 * (size_t)count + 16;
    out = PyMem_Malloc(bound);
    body = PyMem_Malloc(bound);
    if (out == NULL || body == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint8_t *w = out;
    int first = 1;
    long long base_timestamp = 0, max_timestamp = 0;
    for (long long index = 0; index < count; index++) {
        long long size;
        if (bounded_varint(d, &pos, end, 5, INT_MASK, &size) < 0)
            goto done;
        if (size <= 0 || size > end - pos) {
            PyErr_Format(CorruptRecordError, "Record %lld of the batch has a size of %lld bytes, but %zd bytes are "
                         "left", index, size, end - pos);
            goto done;
        }
        Py_ssize_t record_end = pos + (Py_ssize_t)size;
        if (!flags[index]) {
            pos = record_end;
            continue;
        }
        Py_ssize_t p = pos + 1;
        long long timestamp_delta, offset_delta, key_length, value_length, header_count;
        Py_ssize_t key_start = 0, value_start = 0;
        if (bounded_varint(d, &p, record_end, 10, LONG_MASK, &timestamp_delta) < 0 ||
            bounded_varint(d, &p, record_end, 5, INT_MASK, &offset_delta) < 0 ||
            bounded_bytes(d, &p, record_end, "key", &key_start, &key_length) < 0 ||
            bounded_bytes(d, &p, record_end, "value", &value_start, &value_length) < 0 ||
            bounded_varint(d, &p, record_end, 5, INT_MASK, &header_count) < 0)
            goto done;
        long long timestamp;
        if (log_append)
            timestamp = log_append_time;
        else if (__builtin_add_overflow(batch_timestamp, timestamp_delta, &timestamp))
            goto python;
        if (first) {
            base_timestamp = has_horizon ? horizon : timestamp;
            max_timestamp = timestamp;
            first = 0;
        }
        else if (timestamp > max_timestamp)
            max_timestamp = timestamp;
        long long new_delta;
        if (__builtin_sub_overflow(timestamp, base_timestamp, &new_delta))
            goto python;
        uint8_t *b = body;
        *b++ = 0;
        b = put_varint(b, new_delta);
        b = put_varint(b, offset_delta);
        b = put_field(b, d + key_start, key_length);
        b = put_field(b, d + value_start, value_length);
        b = put_varint(b, header_count);
        for (long long h = 0; h < header_count; h++) {
            long long hkey_length, hvalue_length;
            Py_ssize_t hkey_start = 0, hvalue_start = 0;
            if (bounded_bytes(d, &p, record_end, "header key", &hkey_start, &hkey_length) < 0 ||
                bounded_bytes(d, &p, record_end, "header value", &hvalue_start, &hvalue_length) < 0)
                goto done;
            if (hkey_length < 0) {
                PyErr_SetString(CorruptRecordError, "Record has a header with a null key");
                goto done;
            }
            if (valid_utf8(d + hkey_start, (Py_ssize_t)hkey_length))
                b = put_field(b, d + hkey_start, hkey_length);
            else {
                PyObject *replaced = replaced_utf8(d + hkey_start, (Py_ssize_t)hkey_length);
                if (replaced == NULL)
                    goto done;
                b = put_field(b, (const uint8_t *)PyBytes_AS_STRING(replaced), PyBytes_GET_SIZE(replaced));
                Py_DECREF(replaced);
            }
            b = put_field(b, d + hvalue_start, hvalue_length);
        }
        w = put_varint(w, (long long)(b - body));
        memcpy(w, body, (size_t)(b - body));
        w += b - body;
        pos = record_end;
    }
    if (log_append)
        max_timestamp = log_append_time;
    result = Py_BuildValue("(y#LL)", (const char *)out, (Py_ssize_t)(w - out), base_timestamp, max_timestamp);
    goto done;
python:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(out);
    PyMem_Free(body);
    PyBuffer_Release(&flag_view);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(buf, pos, end, delta) -> (records, low timestamp delta, high timestamp delta, null keys)\n\n"
     "log_validator._python_walk, compiled."},
    {"put_records", (PyCFunction)(void (*)(void))put_records, METH_FASTCALL,
     "put_records(buf, pos, end, count, base_offset, start_offset, offsets, max_size) -> (full, last offset put)\n\n"
     "log_cleaner._python_put_records, compiled."},
    {"retained", (PyCFunction)(void (*)(void))retained, METH_FASTCALL,
     "retained(buf, pos, end, count, base_offset, offsets, latest_offset, keep_tombstones) -> (kept, flags, "
     "tombstones)\n\nlog_cleaner._python_retained, compiled."},
    {"rewrite", (PyCFunction)(void (*)(void))rewrite, METH_FASTCALL,
     "rewrite(buf, pos, end, count, flags, base_timestamp, log_append_time, horizon) -> (records, base timestamp, "
     "max timestamp) or None\n\nlog_cleaner._python_rewrite, compiled."},
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
    md5_init_constants();
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
