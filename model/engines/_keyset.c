/* The set of 64-bit state keys a level-at-a-time search has seen (issue 36): see keyset.py, the
 * Python face of this file, for why it is compiled and what it promises.
 *
 * Open addressing with linear probing, as SPIN's hash table does, split into NSEG segments by the
 * top bits of the mixed key: a segment grows on its own (by GROWTH, rehashed), so a growth holds
 * two copies of one segment, never of the whole set (a set of 21 million keys as one table held
 * 500 MB for a moment at its last growth, as many as the sorted array it replaced held with its
 * merge copy).  Zero is the empty slot; the key 0 is kept apart. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define SEG_BITS 8
#define NSEG (1 << SEG_BITS)
#define FIRST_SLOTS 16
/* a segment fills at most MAX_LOAD_NUM / MAX_LOAD_DEN of its slots, then grows by GROWTH_NUM / GROWTH_DEN */
#define MAX_LOAD_NUM 3
#define MAX_LOAD_DEN 4
#define GROWTH_NUM 3
#define GROWTH_DEN 2
/* slots a segment may have (a slot is picked by a 32-bit by 32-bit product) */
#define MAX_SEG_SLOTS ((uint64_t)1 << 32)

typedef struct {
    uint64_t *slots;
    uint64_t size;
    uint64_t n;
} Segment;

typedef struct {
    PyObject_HEAD
    Segment seg[NSEG];
    int has_zero;
    uint64_t n;
} KeySetObject;

/* SplitMix64's finaliser: a packing of at most 64 bits is its own key, far from uniform */
static inline uint64_t mix(uint64_t k) {
    k ^= k >> 30;
    k *= 0xBF58476D1CE4E5B9ULL;
    k ^= k >> 27;
    k *= 0x94D049BB133111EBULL;
    return k ^ (k >> 31);
}

/* the home slot of mixed key h in a segment of `size` slots: 32 bits below the segment's, scaled */
static inline uint64_t home(uint64_t h, uint64_t size) {
    return (((h >> (32 - SEG_BITS)) & 0xFFFFFFFFULL) * size) >> 32;
}

static void put(Segment *g, uint64_t k, uint64_t h) {
    uint64_t s = home(h, g->size);
    while (g->slots[s] != 0) {
        if (++s == g->size)
            s = 0;
    }
    g->slots[s] = k;
}

/* 0 on success, -1 with a Python error set */
static int grow(Segment *g) {
    uint64_t size = g->size * GROWTH_NUM / GROWTH_DEN + 1;
    if (size > MAX_SEG_SLOTS) {
        PyErr_Format(PyExc_MemoryError, "the set of seen states would need %llu slots in one of its %d segments, "
                     "more than %llu: search on Spark (conq check --master)",
                     (unsigned long long)size, NSEG, (unsigned long long)MAX_SEG_SLOTS);
        return -1;
    }
    uint64_t *slots = calloc(size, sizeof(uint64_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Segment fresh = {slots, size, g->n};
    for (uint64_t i = 0; i < g->size; i++) {
        uint64_t k = g->slots[i];
        if (k != 0)
            put(&fresh, k, mix(k));
    }
    free(g->slots);
    *g = fresh;
    return 0;
}

static PyObject *KeySet_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist))
        return NULL;
    KeySetObject *self = (KeySetObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    for (int j = 0; j < NSEG; j++) {
        self->seg[j].slots = calloc(FIRST_SLOTS, sizeof(uint64_t));
        if (self->seg[j].slots == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        self->seg[j].size = FIRST_SLOTS;
    }
    return (PyObject *)self;
}

static void KeySet_dealloc(KeySetObject *self) {
    for (int j = 0; j < NSEG; j++)
        free(self->seg[j].slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* admit(keys, out) -> count: keys a buffer of uint64, out a writable buffer of int64 at least as
 * long; the index of each key not in the set, at its first occurrence, goes to out in order, and
 * the key joins the set */
static PyObject *KeySet_admit(KeySetObject *self, PyObject *args) {
    Py_buffer kb, ob;
    if (!PyArg_ParseTuple(args, "y*w*", &kb, &ob))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t m = kb.len / (Py_ssize_t)sizeof(uint64_t);
    if (kb.len % (Py_ssize_t)sizeof(uint64_t) != 0 || ob.len < m * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "admit(keys, out): keys must be uint64 and out int64 of at least as many");
        goto done;
    }
    const uint64_t *keys = (const uint64_t *)kb.buf;
    int64_t *out = (int64_t *)ob.buf;
    Py_ssize_t got = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t k = keys[i];
        if (k == 0) {
            if (!self->has_zero) {
                self->has_zero = 1;
                self->n++;
                out[got++] = i;
            }
            continue;
        }
        uint64_t h = mix(k);
        Segment *g = &self->seg[h >> (64 - SEG_BITS)];
        uint64_t s = home(h, g->size);
        for (;;) {
            uint64_t v = g->slots[s];
            if (v == k)
                break;
            if (v == 0) {
                if ((g->n + 1) * MAX_LOAD_DEN > g->size * MAX_LOAD_NUM) {
                    if (grow(g) < 0)
                        goto done;
                    put(g, k, h);
                } else {
                    g->slots[s] = k;
                }
                g->n++;
                self->n++;
                out[got++] = i;
                break;
            }
            if (++s == g->size)
                s = 0;
        }
    }
    result = PyLong_FromSsize_t(got);
done:
    PyBuffer_Release(&kb);
    PyBuffer_Release(&ob);
    return result;
}

static PyObject *KeySet_nbytes(KeySetObject *self, PyObject *Py_UNUSED(ignored)) {
    uint64_t total = 0;
    for (int j = 0; j < NSEG; j++)
        total += self->seg[j].size * sizeof(uint64_t);
    return PyLong_FromUnsignedLongLong(total);
}

static PyObject *KeySet_slots(KeySetObject *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *sizes = PyList_New(NSEG);
    if (sizes == NULL)
        return NULL;
    for (int j = 0; j < NSEG; j++) {
        PyObject *pair = Py_BuildValue("(KK)", (unsigned long long)self->seg[j].n, (unsigned long long)self->seg[j].size);
        if (pair == NULL) {
            Py_DECREF(sizes);
            return NULL;
        }
        PyList_SET_ITEM(sizes, j, pair);
    }
    return sizes;
}

static Py_ssize_t KeySet_len(KeySetObject *self) {
    return (Py_ssize_t)self->n;
}

static PyMethodDef KeySet_methods[] = {
    {"admit", (PyCFunction)KeySet_admit, METH_VARARGS,
     "admit(keys, out) -> count: the indices of the keys not seen, first occurrences in order, into out"},
    {"nbytes", (PyCFunction)KeySet_nbytes, METH_NOARGS, "bytes of slots held"},
    {"segments", (PyCFunction)KeySet_slots, METH_NOARGS, "per segment, (keys, slots)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods KeySet_as_sequence = {
    .sq_length = (lenfunc)KeySet_len,
};

static PyTypeObject KeySetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "conq.model.engines._keyset.KeySet",
    .tp_basicsize = sizeof(KeySetObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A set of uint64 keys (see keyset.py)",
    .tp_new = KeySet_new,
    .tp_dealloc = (destructor)KeySet_dealloc,
    .tp_methods = KeySet_methods,
    .tp_as_sequence = &KeySet_as_sequence,
};

static struct PyModuleDef keyset_module = {
    PyModuleDef_HEAD_INIT, "_keyset", "The compiled set of seen state keys (see keyset.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__keyset(void) {
    if (PyType_Ready(&KeySetType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&keyset_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&KeySetType);
    if (PyModule_AddObject(m, "KeySet", (PyObject *)&KeySetType) < 0) {
        Py_DECREF(&KeySetType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "SEGMENTS", NSEG) < 0 || PyModule_AddIntConstant(m, "FIRST_SLOTS", FIRST_SLOTS) < 0 ||
        PyModule_AddObject(m, "MAX_LOAD", PyFloat_FromDouble((double)MAX_LOAD_NUM / MAX_LOAD_DEN)) < 0 ||
        PyModule_AddObject(m, "GROWTH", PyFloat_FromDouble((double)GROWTH_NUM / GROWTH_DEN)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
