/* The level-at-a-time search's two compiled kernels (issue 36): the set of 64-bit state keys it
 * has seen (KeySet; see keyset.py, its Python face, for why it is compiled and what it promises),
 * and the successors of a chunk of states from their sections' recorded entries (successors; see
 * vector.py's VectorExpander.expand, its caller).
 *
 * KeySet:
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
/* keys ahead whose first slot is prefetched */
#define PREFETCH 16

typedef struct {
    uint64_t *slots;
    uint64_t size;
    uint64_t n;
} Segment;

typedef struct {
    PyObject_HEAD
    Segment seg[NSEG];
    int has_zero;
    int width; /* words a key: a slot holds `width` words, empty when all are zero */
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

/* the mixed value of a key of `width` words, word j at k[j * stride] */
static inline uint64_t mix_words(const uint64_t *k, int width, Py_ssize_t stride) {
    uint64_t h = mix(k[0]);
    for (int j = 1; j < width; j++)
        h = mix(h ^ k[j * stride] ^ 0x9E3779B97F4A7C15ULL);
    return h;
}

/* the home slot of mixed key h in a segment of `size` slots: 32 bits below the segment's, scaled */
static inline uint64_t home(uint64_t h, uint64_t size) {
    return (((h >> (32 - SEG_BITS)) & 0xFFFFFFFFULL) * size) >> 32;
}

static inline int empty_slot(const uint64_t *slot, int width) {
    for (int j = 0; j < width; j++)
        if (slot[j] != 0)
            return 0;
    return 1;
}

/* put the key k (word j at k[j * stride], mixed value h) in the first empty slot from its home */
static void put(Segment *g, int width, const uint64_t *k, Py_ssize_t stride, uint64_t h) {
    uint64_t s = home(h, g->size);
    while (!empty_slot(&g->slots[s * width], width)) {
        if (++s == g->size)
            s = 0;
    }
    for (int j = 0; j < width; j++)
        g->slots[s * width + j] = k[j * stride];
}

/* 0 on success, -1 with a Python error set */
static int grow(Segment *g, int width) {
    uint64_t size = g->size * GROWTH_NUM / GROWTH_DEN + 1;
    if (size > MAX_SEG_SLOTS) {
        PyErr_Format(PyExc_MemoryError, "the set of seen states would need %llu slots in one of its %d segments, "
                     "more than %llu: search on Spark (conq check --master)",
                     (unsigned long long)size, NSEG, (unsigned long long)MAX_SEG_SLOTS);
        return -1;
    }
    uint64_t *slots = calloc(size * width, sizeof(uint64_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Segment fresh = {slots, size, g->n};
    for (uint64_t i = 0; i < g->size; i++) {
        const uint64_t *k = &g->slots[i * width];
        if (!empty_slot(k, width))
            put(&fresh, width, k, 1, mix_words(k, width, 1));
    }
    free(g->slots);
    *g = fresh;
    return 0;
}

static PyObject *KeySet_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"width", NULL};
    int width = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|i", kwlist, &width))
        return NULL;
    if (width < 1 || width > 64) {
        PyErr_Format(PyExc_ValueError, "KeySet(width=%d): a key is 1 to 64 words", width);
        return NULL;
    }
    KeySetObject *self = (KeySetObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->width = width;
    for (int j = 0; j < NSEG; j++) {
        self->seg[j].slots = calloc((size_t)FIRST_SLOTS * width, sizeof(uint64_t));
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

/* the keys of several words: admit's work for width > 1 (keys word-major: word j of key i at
 * keys[j * m + i]); returns how many went to out, or -1 with a Python error set.  (Keys of one
 * word, a packing's own state, keep their own loop in KeySet_admit: one compare a probe, and the
 * prefetch, for the searches whose speed issue 36 measured beside SPIN.) */
static Py_ssize_t admit_words(KeySetObject *self, const uint64_t *keys, Py_ssize_t m, int64_t *out) {
    const int width = self->width;
    Py_ssize_t got = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        const uint64_t *k = &keys[i];
        int zero = 1;
        for (int j = 0; j < width; j++)
            if (k[j * m] != 0)
                zero = 0;
        if (zero) {
            if (!self->has_zero) {
                self->has_zero = 1;
                self->n++;
                out[got++] = i;
            }
            continue;
        }
        uint64_t h = mix_words(k, width, m);
        Segment *g = &self->seg[h >> (64 - SEG_BITS)];
        uint64_t s = home(h, g->size);
        for (;;) {
            uint64_t *v = &g->slots[s * width];
            int same = 1;
            for (int j = 0; j < width; j++)
                if (v[j] != k[j * m])
                    same = 0;
            if (same)
                break;
            if (empty_slot(v, width)) {
                if ((g->n + 1) * MAX_LOAD_DEN > g->size * MAX_LOAD_NUM) {
                    if (grow(g, width) < 0)
                        return -1;
                    put(g, width, k, m, h);
                } else {
                    for (int j = 0; j < width; j++)
                        v[j] = k[j * m];
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
    return got;
}

/* admit(keys, out) -> count: keys a buffer of uint64, out a writable buffer of int64 at least as
 * long; the index of each key not in the set, at its first occurrence, goes to out in order, and
 * the key joins the set */
static PyObject *KeySet_admit(KeySetObject *self, PyObject *args) {
    Py_buffer kb, ob;
    if (!PyArg_ParseTuple(args, "y*w*", &kb, &ob))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t kw = (Py_ssize_t)sizeof(uint64_t) * self->width;
    Py_ssize_t m = kb.len / kw;
    if (kb.len % kw != 0 || ob.len < m * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "admit(keys, out): keys must be uint64, %d word(s) a key, word-major, and out "
                     "int64 of at least as many", self->width);
        goto done;
    }
    const uint64_t *keys = (const uint64_t *)kb.buf;
    int64_t *out = (int64_t *)ob.buf;
    Py_ssize_t got = 0;
    if (self->width > 1) {
        got = admit_words(self, keys, m, out);
        if (got >= 0)
            result = PyLong_FromSsize_t(got);
        goto done;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i + PREFETCH < m) {
            /* the slot a later key probes first, fetched while this one is probed: the table is
             * larger than the caches, and a probe is a memory latency (a hint only: harmless if
             * that segment grows before the key gets there) */
            uint64_t hp = mix(keys[i + PREFETCH]);
            const Segment *gp = &self->seg[hp >> (64 - SEG_BITS)];
            __builtin_prefetch(&gp->slots[home(hp, gp->size)]);
        }
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
                    if (grow(g, 1) < 0)
                        goto done;
                    put(g, 1, &k, 1, h);
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
        total += self->seg[j].size * self->width * sizeof(uint64_t);
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
    .tp_name = "conq.model.engines._search.KeySet",
    .tp_basicsize = sizeof(KeySetObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A set of uint64 keys (see keyset.py)",
    .tp_new = KeySet_new,
    .tp_dealloc = (destructor)KeySet_dealloc,
    .tp_methods = KeySet_methods,
    .tp_as_sequence = &KeySet_as_sequence,
};


/* successors(info, X, flat, keep, put, Y, G, n, sections, W, cap): for the n states of X (W words
 * each, word-major: X[w * n + i]) and their sections' entries info (sections rows of n int64, as
 * vector.py's entry_info packs them: the start of a run of step ids in flat above bit FIRST_SHIFT,
 * the run's length in the low COUNT_BITS), write every successor, state by state and section by
 * section within a state (the model's order), to Y (word-major, T of them) and its step id to G:
 * Y = (x & keep[g]) | put[g], keep and put word-major with cap steps a word.  T, the sum of the
 * runs' lengths, is Y's and G's length; the caller sized them. */
#define COUNT_BITS 19
#define FIRST_SHIFT (COUNT_BITS + 1)

static PyObject *successors(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer ib, xb, fb, kb, pb, yb, gb;
    Py_ssize_t n, sections, W, cap;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*nnnn", &ib, &xb, &fb, &kb, &pb, &yb, &gb, &n, &sections, &W, &cap))
        return NULL;
    PyObject *result = NULL;
    const int64_t *info = (const int64_t *)ib.buf;
    const uint64_t *X = (const uint64_t *)xb.buf;
    const int32_t *flat = (const int32_t *)fb.buf;
    const uint64_t *keep = (const uint64_t *)kb.buf, *put = (const uint64_t *)pb.buf;
    uint64_t *Y = (uint64_t *)yb.buf;
    int32_t *G = (int32_t *)gb.buf;
    Py_ssize_t T = yb.len / (Py_ssize_t)sizeof(uint64_t) / (W > 0 ? W : 1);
    Py_ssize_t nflat = fb.len / (Py_ssize_t)sizeof(int32_t);
    if (n < 0 || sections < 0 || W < 1 || cap < 0 || ib.len != n * sections * (Py_ssize_t)sizeof(int64_t) ||
        xb.len != W * n * (Py_ssize_t)sizeof(uint64_t) || kb.len != W * cap * (Py_ssize_t)sizeof(uint64_t) ||
        pb.len != kb.len || gb.len != T * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "successors: arrays of the wrong sizes");
        goto done;
    }
    Py_ssize_t t = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        for (Py_ssize_t s = 0; s < sections; s++) {
            int64_t cell = info[s * n + i];
            Py_ssize_t count = (Py_ssize_t)(cell & ((1 << COUNT_BITS) - 1));
            Py_ssize_t first = (Py_ssize_t)(cell >> FIRST_SHIFT);
            if (count == 0)
                continue;
            if (cell < 0 || first + count > nflat || t + count > T) {
                PyErr_SetString(PyExc_ValueError, "successors: an entry outside the runs of step ids, or more successors than Y holds");
                goto done;
            }
            for (Py_ssize_t j = 0; j < count; j++, t++) {
                int32_t g = flat[first + j];
                if (g < 0 || g >= cap) {
                    PyErr_SetString(PyExc_ValueError, "successors: a step id outside keep and put");
                    goto done;
                }
                G[t] = g;
                for (Py_ssize_t w = 0; w < W; w++)
                    Y[w * T + t] = (X[w * n + i] & keep[w * cap + g]) | put[w * cap + g];
            }
        }
    }
    if (t != T) {
        PyErr_SetString(PyExc_ValueError, "successors: fewer successors than Y holds");
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&ib);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&yb);
    PyBuffer_Release(&gb);
    return result;
}

static PyMethodDef search_functions[] = {
    {"successors", (PyCFunction)successors, METH_VARARGS,
     "successors(info, X, flat, keep, put, Y, G, n, sections, W, cap): a chunk's successors (vector.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef search_module = {
    PyModuleDef_HEAD_INIT, "_search", "The level search's compiled kernels (see keyset.py and vector.py).", -1,
    search_functions,
};

PyMODINIT_FUNC PyInit__search(void) {
    if (PyType_Ready(&KeySetType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&search_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&KeySetType);
    if (PyModule_AddObject(m, "KeySet", (PyObject *)&KeySetType) < 0) {
        Py_DECREF(&KeySetType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "COUNT_BITS", COUNT_BITS) < 0 || PyModule_AddIntConstant(m, "SEGMENTS", NSEG) < 0 || PyModule_AddIntConstant(m, "FIRST_SLOTS", FIRST_SLOTS) < 0 ||
        PyModule_AddObject(m, "MAX_LOAD", PyFloat_FromDouble((double)MAX_LOAD_NUM / MAX_LOAD_DEN)) < 0 ||
        PyModule_AddObject(m, "GROWTH", PyFloat_FromDouble((double)GROWTH_NUM / GROWTH_DEN)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
