/* The per-record walk of storage/log_validator.py (Kafka's LogValidator reading each DefaultRecord), compiled:
 * on a produce load of small records it is most of the broker's CPU in Python.
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
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred())
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

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(buf, pos, end, delta) -> (records, low timestamp delta, high timestamp delta, null keys)\n\n"
     "log_validator._python_walk, compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "minikafka.storage._record_walk",
    "The record walk of Kafka's LogValidator, compiled (storage/log_validator.py holds the Python reference).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__record_walk(void)
{
    if (InvalidRecordError == NULL) {
        /* The project's class, so that `except InvalidRecordError` catches what this module raises. */
        PyObject *record_batch = PyImport_ImportModule("minikafka.protocol.record_batch");
        if (record_batch == NULL)
            return NULL;
        InvalidRecordError = PyObject_GetAttrString(record_batch, "InvalidRecordError");
        Py_DECREF(record_batch);
        if (InvalidRecordError == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
