/* prep_scan.c - finding utterances: LibriSpeech trees and CSV manifests. */
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"   /* ds_log_utf8_len */
#include "file_input.h"
#include "prep.h"

#define MAX_REPORTED 10   /* per kind of problem; the rest are only counted */

/* A UTF-8 byte order mark opening a text file (editors on Windows write
 * one) is not part of its first line's id or path. */
static void drop_bom(char *line, long lineno)
{
    if (lineno == 1 && !strncmp(line, "\xEF\xBB\xBF", 3))
        memmove(line, line + 3, strlen(line + 3) + 1);
}

/* A text file's line (len bytes, as getline read it) is UTF-8: a UTF-16
 * or UTF-32 file (Windows' "Unicode"), whose NUL bytes cut every line
 * short, or one in another 8-bit encoding is named as such, not read as
 * lines of garbage or of no audio. */
static ds_status check_utf8(const char *line, ssize_t len, const char *path, long lineno)
{
    const unsigned char *u = (const unsigned char *)line;
    if (lineno == 1 && len >= 2 && ((u[0] == 0xFF && u[1] == 0xFE) || (u[0] == 0xFE && u[1] == 0xFF)))
        return DS_FAIL(DS_ERR_ARG, "%s: is UTF-%s (its byte order mark says so): save it as "
                                   "UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)", path,
                       len >= 4 && u[2] == 0 && u[3] == 0 ? "32" : "16");
    if ((ssize_t)strlen(line) < len)
        return DS_FAIL(DS_ERR_ARG, "%s:%ld: holds NUL bytes, so it is not UTF-8 text (UTF-16 "
                                   "without a byte order mark?): save it as UTF-8", path, lineno);
    for (ssize_t i = 0; i < len;) {
        const int n = ds_log_utf8_len(line + i);
        if (!n)
            return DS_FAIL(DS_ERR_ARG, "%s:%ld: byte %zd (0x%02x) is not UTF-8 (Latin-1 or "
                                       "another code page?): save the file as UTF-8", path,
                           lineno, i + 1, u[i]);
        i += n;
    }
    return DS_OK;
}

static ds_status add_item(ds_prep_list *l, const char *id, const char *audio, const char *text)
{
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 1024;
        ds_prep_item *items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items)
            return DS_FAIL(DS_ERR_MEM, "utterance list of %ld", cap);
        l->items = items;
        l->cap = cap;
    }
    ds_prep_item *it = &l->items[l->n];
    it->id = strdup(id);
    it->audio = strdup(audio);
    it->text = strdup(text);
    if (!it->id || !it->audio || !it->text)
        return DS_FAIL(DS_ERR_MEM, "utterance %s", id);
    l->n++;
    return DS_OK;
}

/* Records path as a transcript file read (an output must not replace it). */
static ds_status add_text_file(ds_prep_list *l, const char *path)
{
    if (l->n_text_files == l->text_files_cap) {
        long cap = l->text_files_cap ? 2 * l->text_files_cap : 64;
        char **p = realloc(l->text_files, (size_t)cap * sizeof *p);
        if (!p)
            return DS_FAIL(DS_ERR_MEM, "list of %ld transcript files", cap);
        l->text_files = p;
        l->text_files_cap = cap;
    }
    if (!(l->text_files[l->n_text_files] = strdup(path)))
        return DS_FAIL(DS_ERR_MEM, "transcript file %s", path);
    l->n_text_files++;
    return DS_OK;
}

void ds_prep_list_free(ds_prep_list *l)
{
    for (long i = 0; i < l->n_text_files; i++)
        free(l->text_files[i]);
    free(l->text_files);
    for (long i = 0; i < l->n; i++) {
        free(l->items[i].id);
        free(l->items[i].audio);
        free(l->items[i].text);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const ds_prep_item *)a)->id, ((const ds_prep_item *)b)->id);
}

/* Two utterances of one id would be one utterance twice (a manifest line
 * repeated) or two recordings confused: refused, naming the id, how often
 * it appears and its audio files. Items sorted by id. */
static ds_status refuse_duplicates(const ds_prep_list *l, const char *source)
{
    for (long i = 1; i < l->n; i++) {
        if (strcmp(l->items[i].id, l->items[i - 1].id) != 0)
            continue;
        long k = i + 1;
        while (k < l->n && !strcmp(l->items[k].id, l->items[i].id))
            k++;
        return DS_FAIL(DS_ERR_IO, "%s: utterance id %s appears %ld times (audio %s and %s%s): "
                       "ids must be unique", source, l->items[i].id, k - i + 1,
                       l->items[i - 1].audio, l->items[i].audio, k - i + 1 > 2 ? ", ..." : "");
    }
    return DS_OK;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- LibriSpeech ---- */

/* What the directory walk collects: transcript files and audio files. */
typedef struct {
    char **paths;
    long n, cap;
} path_set;

static path_set walk_trans, walk_flac;   /* nftw has no user pointer */

static int push_path(path_set *s, const char *p)
{
    if (s->n == s->cap) {
        long cap = s->cap ? 2 * s->cap : 256;
        char **paths = realloc(s->paths, (size_t)cap * sizeof *paths);
        if (!paths)
            return -1;
        s->paths = paths;
        s->cap = cap;
    }
    return (s->paths[s->n++] = strdup(p)) ? 0 : -1;
}

static void free_paths(path_set *s)
{
    for (long i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    memset(s, 0, sizeof *s);
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type != FTW_F)
        return 0;
    if (ends_with(path, ".trans.txt"))
        return push_path(&walk_trans, path);
    if (ends_with(path, ".flac"))
        return push_path(&walk_flac, path);
    return 0;
}


/* The directory of path into dir [cap]: "." for a bare name. dirname() may
 * return a static string instead of editing its argument ("m.csv" -> "."),
 * so its result is what is copied. */
static void dir_of(const char *path, char *dir, size_t cap)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    snprintf(dir, cap, "%s", dirname(tmp));
}

/* One SPEAKER-CHAPTER.trans.txt: "ID TRANSCRIPT" lines, audio beside it. */
static ds_status read_trans(const char *path, ds_prep_list *l)
{
    /* a FIFO named *.trans.txt would block the open for ever */
    DS_TRY(ds_file_require_regular(path, "LibriSpeech transcript file"));
    DS_TRY(add_text_file(l, path));
    FILE *f = fopen(path, "r");
    if (!f)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open transcript file", path);
    char dir[4096], audio[4352], *line = NULL;
    dir_of(path, dir, sizeof dir);
    size_t cap = 0;
    ds_status st = DS_OK;
    long lineno = 0;
    ssize_t len;
    while (st == DS_OK && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if ((st = check_utf8(line, len, path, lineno)) != DS_OK)
            break;
        line[strcspn(line, "\r\n")] = '\0';
        drop_bom(line, lineno);
        char *sp = strchr(line, ' ');
        if (!*line)
            continue;
        if (!sp || sp == line) {
            if (l->bad_lines++ < MAX_REPORTED)
                fprintf(stderr, "prep: %s:%ld: expected \"ID TRANSCRIPT\", skipped\n", path, lineno);
            continue;
        }
        *sp = '\0';
        snprintf(audio, sizeof audio, "%s/%s.flac", dir, line);
        if (access(audio, R_OK) != 0) {
            if (l->missing_audio++ < MAX_REPORTED)
                fprintf(stderr, "prep: %s:%ld: no audio %s, skipped\n", path, lineno, audio);
            continue;
        }
        st = add_item(l, line, audio, sp + 1);
    }
    if (st == DS_OK && ferror(f))
        st = DS_FAIL(DS_ERR_IO, "%s: read error", path);
    free(line);
    fclose(f);
    return st;
}

/* Counts (and reports a few) audio files that no transcript line names. */
static void count_orphans(ds_prep_list *l)
{
    char **used = malloc((size_t)(l->n ? l->n : 1) * sizeof *used);
    if (!used)
        return;
    for (long i = 0; i < l->n; i++)
        used[i] = l->items[i].audio;
    qsort(used, (size_t)l->n, sizeof *used, by_string);
    for (long i = 0; i < walk_flac.n; i++) {
        const char *p = walk_flac.paths[i];
        if (bsearch(&p, used, (size_t)l->n, sizeof *used, by_string))
            continue;
        if (l->audio_without_text++ < MAX_REPORTED)
            fprintf(stderr, "prep: %s has no transcript line, skipped\n", p);
    }
    free(used);
}

ds_status ds_prep_scan_librispeech(const char *root, ds_prep_list *out)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return DS_FAIL(DS_ERR_IO, "%s: not a directory (expected a LibriSpeech split, e.g. "
                                  "LibriSpeech/train-clean-100)", root);
    if (nftw(root, visit, 32, FTW_PHYS) != 0) {
        free_paths(&walk_trans);
        free_paths(&walk_flac);
        return DS_FAIL(DS_ERR_IO, "%s: cannot walk the directory tree", root);
    }
    qsort(walk_trans.paths, (size_t)walk_trans.n, sizeof(char *), by_string);
    ds_status st = DS_OK;
    for (long i = 0; st == DS_OK && i < walk_trans.n; i++)
        st = read_trans(walk_trans.paths[i], out);
    if (st == DS_OK && walk_trans.n == 0)
        st = DS_FAIL(DS_ERR_IO, "%s: no *.trans.txt transcript files below it (%ld .flac files)",
                     root, walk_flac.n);
    if (st == DS_OK) {
        count_orphans(out);
        qsort(out->items, (size_t)out->n, sizeof *out->items, by_id);
        st = refuse_duplicates(out, root);
    }
    free_paths(&walk_trans);
    free_paths(&walk_flac);
    return st;
}

/* ---- CSV manifests ---- */

/* Text of a transcript field: the field itself, or the contents of the .txt
 * file it names (older deepspeech.pytorch manifests). malloc'd into *out
 * (NULL: no memory); a .txt path naming something other than a regular
 * file (a FIFO would block the read for ever) is refused. */
static ds_status transcript_field(ds_prep_list *l, const char *field, const char *base, char **out)
{
    char path[8192];
    struct stat sb;
    *out = NULL;
    if (ends_with(field, ".txt")) {
        snprintf(path, sizeof path, "%s%s%s", field[0] == '/' ? "" : base, field[0] == '/' ? "" : "/", field);
        if (stat(path, &sb) == 0) {
            DS_TRY(ds_file_require_regular(path, "transcript file the manifest names"));
            DS_TRY(add_text_file(l, path));
        }
        FILE *f = fopen(path, "r");
        if (f) {
            char *text = NULL;
            size_t cap = 0;
            ssize_t n = getdelim(&text, &cap, '\0', f);
            fclose(f);
            if (n >= 0) {
                *out = text;
                return DS_OK;
            }
            free(text);
        }
    }
    char *t = *out = strdup(field);
    size_t n = t ? strlen(t) : 0;
    if (t && n >= 2 && t[0] == '"' && t[n - 1] == '"') {   /* "quoted, with commas" */
        memmove(t, t + 1, n - 2);
        t[n - 2] = '\0';
    }
    return DS_OK;
}

/* Splits "audio,transcript" or "audio,size,transcript" in place. */
static int split_csv(char *line, char **audio, char **text)
{
    char *c1 = strchr(line, ',');
    if (!c1)
        return -1;
    *c1 = '\0';
    *audio = line;
    *text = c1 + 1;
    char *c2 = strchr(*text, ',');
    if (c2 && c2 > *text && strspn(*text, "0123456789") == (size_t)(c2 - *text))
        *text = c2 + 1;   /* Mozilla DeepSpeech: wav_filename,wav_filesize,transcript */
    return 0;
}

static ds_status manifest_line(ds_prep_list *l, char *line, const char *csv, const char *base,
                               long lineno)
{
    char *audio, *field, path[8192], id[512];
    if (split_csv(line, &audio, &field) != 0) {
        if (l->bad_lines++ < MAX_REPORTED)
            fprintf(stderr, "prep: %s:%ld: expected \"audio_path,transcript\", skipped\n", csv, lineno);
        return DS_OK;
    }
    snprintf(path, sizeof path, "%s%s%s", audio[0] == '/' ? "" : base, audio[0] == '/' ? "" : "/", audio);
    if (access(path, R_OK) != 0) {
        if (l->missing_audio++ < MAX_REPORTED)
            fprintf(stderr, "prep: %s:%ld: no audio %s, skipped\n", csv, lineno, path);
        return DS_OK;
    }
    char *text;
    DS_TRY(transcript_field(l, field, base, &text));
    if (!text)
        return DS_FAIL(DS_ERR_MEM, "%s:%ld", csv, lineno);
    char *slash = strrchr(audio, '/'), *dot;
    snprintf(id, sizeof id, "%s", slash ? slash + 1 : audio);
    if ((dot = strrchr(id, '.')))
        *dot = '\0';
    ds_status st = add_item(l, id, path, text);
    free(text);
    return st;
}

ds_status ds_prep_scan_manifest(const char *csv, ds_prep_list *out)
{
    memset(out, 0, sizeof *out);
    DS_TRY(ds_file_require_regular(csv, "manifest"));   /* a FIFO would block the open */
    FILE *f = fopen(csv, "r");
    if (!f)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open manifest", csv);
    char base[4096], *line = NULL;
    dir_of(csv, base, sizeof base);
    size_t cap = 0;
    long lineno = 0;
    ds_status st = DS_OK;
    ssize_t len;
    while (st == DS_OK && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if ((st = check_utf8(line, len, csv, lineno)) != DS_OK)
            break;
        line[strcspn(line, "\r\n")] = '\0';
        drop_bom(line, lineno);
        if (!*line || (lineno == 1 && (!strncmp(line, "wav_filename,", 13) ||
                                       !strncmp(line, "audio_path,", 11))))
            continue;
        st = manifest_line(out, line, csv, base, lineno);
    }
    if (st == DS_OK && ferror(f))
        st = DS_FAIL(DS_ERR_IO, "%s: read error", csv);
    free(line);
    fclose(f);
    if (st == DS_OK && out->n == 0)
        st = DS_FAIL(DS_ERR_IO, "%s: no usable \"audio_path,transcript\" line", csv);
    if (st == DS_OK) {
        qsort(out->items, (size_t)out->n, sizeof *out->items, by_id);
        st = refuse_duplicates(out, csv);
    }
    return st;
}
