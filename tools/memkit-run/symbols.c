/* SPDX-License-Identifier: MIT */
/*
 * symbols.c - return addresses of a profiled process, in words:
 * "function (file:line)" where addr2line (binutils) is installed and the
 * object has line tables, else "function+0xOFF (library)" from the
 * object's own symbol tables (.symtab, else .dynsym), else "0xADDR
 * (library)".
 *
 * The offset is never dropped without line tables: in a library stripped
 * to its exported symbols, a static function is named by the nearest
 * export below it, which may be a different function altogether
 * ("sqlite3_os_end+0xdfc" is not sqlite3_os_end); the offset is what tells
 * the reader so.  For the same reason addr2line's function name counts
 * only when it also found the line (it takes the name from the same
 * nearest symbol otherwise, with no offset).
 *
 * The process's mappings come with its profile (the .heap file's
 * MAPPED_LIBRARIES section, a copy of /proc/PID/maps taken by the process
 * itself), so the addresses are read against what was mapped where, even
 * after the process is gone.  Each address goes back one byte before it is
 * looked up: a return address is the instruction after the call, which
 * may already be the next line or function.  Trade-off: addr2line is run
 * once per object for all of its addresses (one process, not one per
 * frame); the ELF reader is a small one of its own (64-bit, native byte
 * order), enough to name functions without any library.
 */
#include "run.h"

#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct map {
    uintptr_t lo, hi, off;
    char *path;
} map;

typedef struct fsym {
    uint64_t value, size;
    const char *name;
} fsym;

typedef struct object {
    char *path;
    int read;        /* tried */
    void *image;
    size_t len;
    const Elf64_Phdr *ph;
    int nph;
    fsym *syms;
    size_t nsyms;
} object;

struct mr_symbols {
    map *maps;
    size_t nmaps;
    object *objs;
    size_t nobjs;
    struct entry {
        uintptr_t addr;
        char *text;
    } *cache;
    size_t ncache, capcache;
    int have_addr2line;
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

mr_symbols *mr_symbols_new(const char *maps_text)
{
    mr_symbols *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    char a2l[4096];
    s->have_addr2line = !getenv("MEMKIT_RUN_NO_ADDR2LINE") &&
                        mr_locate_program("addr2line", a2l, sizeof a2l);
    const char *line = maps_text;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        if (n < sizeof buf) {
            memcpy(buf, line, n);
            buf[n] = '\0';
            unsigned long lo, hi, off;
            char perms[8];
            int at = 0;
            if (sscanf(buf, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &at) == 4 &&
                at > 0 && buf[at] == '/' && strchr(perms, 'x')) {
                map *m = realloc(s->maps, (s->nmaps + 1) * sizeof *m);
                if (m) {
                    s->maps = m;
                    m[s->nmaps++] = (map){lo, hi, off, dup_str(buf + at)};
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return s;
}

void mr_symbols_free(mr_symbols *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nmaps; i++)
        free(s->maps[i].path);
    for (size_t i = 0; i < s->nobjs; i++) {
        free(s->objs[i].path);
        free(s->objs[i].syms);
        if (s->objs[i].image)
            munmap(s->objs[i].image, s->objs[i].len);
    }
    for (size_t i = 0; i < s->ncache; i++)
        free(s->cache[i].text);
    free(s->cache);
    free(s->objs);
    free(s->maps);
    free(s);
}

/* ---- the ELF reader ---------------------------------------------------------- */

static int by_value(const void *a, const void *b)
{
    const fsym *x = a, *y = b;
    return x->value < y->value ? -1 : x->value > y->value;
}

static void read_symtab(object *o, const Elf64_Shdr *sh, int nsh, unsigned type)
{
    const char *base = o->image;
    for (int i = 0; i < nsh; i++) {
        if (sh[i].sh_type != type || sh[i].sh_link >= (unsigned)nsh ||
            sh[i].sh_offset + sh[i].sh_size > o->len || !sh[i].sh_entsize)
            continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (str->sh_offset + str->sh_size > o->len)
            continue;
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
        fsym *v = realloc(o->syms, (o->nsyms + n) * sizeof *v);
        if (!v)
            return;
        o->syms = v;
        for (size_t k = 0; k < n; k++) {
            if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !sym[k].st_value ||
                sym[k].st_name >= str->sh_size)
                continue;
            v[o->nsyms++] = (fsym){sym[k].st_value, sym[k].st_size,
                                   base + str->sh_offset + sym[k].st_name};
        }
    }
}

static void object_read(object *o)
{
    o->read = 1;
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return;
    }
    void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED)
        return;
    o->image = img;
    o->len = (size_t)st.st_size;
    const Elf64_Ehdr *eh = img;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_phoff + (size_t)eh->e_phnum * sizeof(Elf64_Phdr) > o->len ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > o->len)
        return;
    o->ph = (const Elf64_Phdr *)((const char *)img + eh->e_phoff);
    o->nph = eh->e_phnum;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)img + eh->e_shoff);
    read_symtab(o, sh, eh->e_shnum, SHT_SYMTAB);
    if (!o->nsyms)
        read_symtab(o, sh, eh->e_shnum, SHT_DYNSYM);
    qsort(o->syms, o->nsyms, sizeof *o->syms, by_value);
}

/* The ELF virtual address of file offset @off of @o (0: none). */
static uint64_t vaddr_of(const object *o, uint64_t off)
{
    for (int i = 0; i < o->nph; i++) {
        const Elf64_Phdr *p = &o->ph[i];
        if (p->p_type == PT_LOAD && off >= p->p_offset && off < p->p_offset + p->p_filesz)
            return off - p->p_offset + p->p_vaddr;
    }
    return 0;
}

/* The symbol at or nearest below @va (NULL: none below it).  Past the
 * symbol's size too: the caller prints the offset, which says how far. */
static const fsym *sym_at(const object *o, uint64_t va)
{
    size_t lo = 0, hi = o->nsyms;
    while (lo < hi) { /* the last symbol at or below va */
        size_t mid = (lo + hi) / 2;
        if (o->syms[mid].value <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    return &o->syms[lo - 1];
}

static object *object_of(mr_symbols *s, const char *path)
{
    for (size_t i = 0; i < s->nobjs; i++)
        if (strcmp(s->objs[i].path, path) == 0)
            return &s->objs[i];
    object *v = realloc(s->objs, (s->nobjs + 1) * sizeof *v);
    if (!v)
        return NULL;
    s->objs = v;
    memset(&v[s->nobjs], 0, sizeof *v);
    v[s->nobjs].path = dup_str(path);
    return &v[s->nobjs++];
}

static const char *base_name(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* ---- naming ---------------------------------------------------------------------- */

static void cache_put(mr_symbols *s, uintptr_t a, char *text)
{
    if (s->ncache == s->capcache) {
        size_t cap = s->capcache ? 2 * s->capcache : 256;
        struct entry *v = realloc(s->cache, cap * sizeof *v);
        if (!v) {
            free(text);
            return;
        }
        s->cache = v;
        s->capcache = cap;
    }
    s->cache[s->ncache++] = (struct entry){a, text};
}

/* Ask addr2line about @n virtual addresses of @path: names[i] gets
 * "function (file:line)" or stays NULL. */
static void ask_addr2line(const char *path, const uint64_t *va, size_t n, char **names)
{
    size_t cap = strlen(path) * 4 + 64 + n * 20;
    char *cmd = malloc(cap);
    if (!cmd)
        return;
    size_t len = (size_t)snprintf(cmd, cap, "addr2line -f -C -e '");
    for (const char *c = path; *c; c++)
        len += (size_t)(*c == '\'' ? snprintf(cmd + len, cap - len, "'\\''")
                                   : snprintf(cmd + len, cap - len, "%c", *c));
    len += (size_t)snprintf(cmd + len, cap - len, "'");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(cmd + len, cap - len, " 0x%llx", (unsigned long long)va[i]);
    snprintf(cmd + len, cap - len, " 2>/dev/null");
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p)
        return;
    char fn[2048], where[2048];
    for (size_t i = 0; i < n && fgets(fn, sizeof fn, p) && fgets(where, sizeof where, p); i++) {
        fn[strcspn(fn, "\n")] = '\0';
        where[strcspn(where, "\n")] = '\0';
        char *disc = strstr(where, " (discriminator");
        if (disc)
            *disc = '\0';
        size_t wl = strlen(where);
        /* no line: the name is only the nearest symbol's; the ELF reader
         * gives it with its offset */
        if (strcmp(fn, "??") == 0 || where[0] == '?' ||
            (wl >= 2 && strcmp(where + wl - 2, ":0") == 0) ||
            (wl >= 2 && strcmp(where + wl - 2, ":?") == 0))
            continue;
        char buf[4200];
        snprintf(buf, sizeof buf, "%s (%s)", fn, base_name(where));
        names[i] = dup_str(buf);
    }
    pclose(p);
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static int entry_by_addr(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void mr_symbols_resolve(mr_symbols *s, const uintptr_t *addrs, size_t n)
{
    uintptr_t *u = malloc((n ? n : 1) * sizeof *u);
    uint64_t *va = malloc((n ? n : 1) * sizeof *va);
    char **names = calloc(n ? n : 1, sizeof *names);
    if (!u || !va || !names) {
        free(u), free(va), free(names);
        return;
    }
    memcpy(u, addrs, n * sizeof *u);
    qsort(u, n, sizeof *u, by_addr);
    size_t nu = 0;
    for (size_t i = 0; i < n; i++)
        if (!nu || u[nu - 1] != u[i])
            u[nu++] = u[i];
    /* each object's addresses go to one addr2line */
    for (size_t m = 0; m < s->nmaps; m++) {
        const map *mp = &s->maps[m];
        size_t first = 0;
        while (first < nu && u[first] - 1 < mp->lo)
            first++;
        size_t k = 0;
        while (first + k < nu && u[first + k] - 1 < mp->hi)
            k++;
        if (!k)
            continue;
        object *o = object_of(s, mp->path);
        if (!o)
            continue;
        if (!o->read)
            object_read(o);
        for (size_t j = 0; j < k; j++) {
            va[j] = vaddr_of(o, u[first + j] - 1 - mp->lo + mp->off);
            names[j] = NULL;
        }
        for (size_t at = 0; s->have_addr2line && at < k; at += 200)
            ask_addr2line(mp->path, va + at, k - at < 200 ? k - at : 200, names + at);
        for (size_t j = 0; j < k; j++) {
            char buf[1200];
            const fsym *f = names[j] ? NULL : sym_at(o, va[j]);
            if (names[j])
                snprintf(buf, sizeof buf, "%s", names[j]);
            else if (f)
                snprintf(buf, sizeof buf, "%s+0x%llx (%s)", f->name,
                         (unsigned long long)(va[j] - f->value), base_name(mp->path));
            else
                snprintf(buf, sizeof buf, "0x%llx (%s)", (unsigned long long)va[j],
                         base_name(mp->path));
            free(names[j]);
            cache_put(s, u[first + j], dup_str(buf));
        }
    }
    qsort(s->cache, s->ncache, sizeof *s->cache, entry_by_addr);
    free(u);
    free(va);
    free(names);
}

const char *mr_symbols_name(const mr_symbols *s, uintptr_t addr)
{
    struct entry key = {addr, NULL};
    const struct entry *e = s->ncache ? bsearch(&key, s->cache, s->ncache, sizeof key,
                                               entry_by_addr)
                                      : NULL;
    return e ? e->text : NULL;
}

int mr_symbols_is_memkit(const mr_symbols *s, uintptr_t addr)
{
    uintptr_t a = addr - 1;
    for (size_t m = 0; m < s->nmaps; m++)
        if (a >= s->maps[m].lo && a < s->maps[m].hi)
            return strstr(base_name(s->maps[m].path), "libmemkit") != NULL;
    return 0;
}
