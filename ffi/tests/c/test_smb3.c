/*
 * Assertions in C over libsmb3's API against a real server, through smb3.h only.
 *
 *   test_smb3 SERVER SHARE USER PASSWORD SHARE_DIR
 *
 * SERVER is host[:port]; the domain comes from SMB_DOMAIN when set. SHARE_DIR is the share's directory as the test can read it
 * (the testbed's share is a local directory), to check bytes on the server's side. The
 * share must keep named streams and ACLs (the testbed's [backup] share). Prints one line
 * per check group and "ALL OK" at the end; any failed check prints where and exits 1.
 */
#include <smb3.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int checks;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n  last error: %s (NTSTATUS "     \
                            "0x%08X, errno %d)\n",                                     \
                    __FILE__, __LINE__, #cond, smb3_last_error_message(),             \
                    smb3_last_error_ntstatus(), smb3_last_error_errno());               \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* A call that must succeed. */
#define OK(call) CHECK((call) == SMB3_OK)

/* A call that must fail with `kind` and, when not 0, the NTSTATUS `status`. */
#define FAILS(call, kind, status)                                                      \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != (kind))                                                             \
            fprintf(stderr, "%s:%d: got %s, want %s\n", __FILE__, __LINE__,           \
                    smb3_error_kind_name(rc_), smb3_error_kind_name(kind));            \
        CHECK(rc_ == (kind));                                                          \
        CHECK(strlen(smb3_last_error_message()) > 0);                                  \
        if ((status) != 0) CHECK(smb3_last_error_ntstatus() == (uint32_t)(status));    \
    } while (0)

#define SNAPSHOT "@GMT-2025.11.20-10.00.00"
#define STATUS_LOGON_FAILURE 0xC000006Du
#define STATUS_OBJECT_NAME_NOT_FOUND 0xC0000034u
#define STATUS_OBJECT_NAME_COLLISION 0xC0000035u
#define STATUS_BAD_NETWORK_NAME 0xC00000CCu

static const char *server, *share_name, *user, *password, *share_dir;

static void fill(unsigned char *buf, size_t len, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
}

/* The whole local file `path` (malloc'd, `*len` bytes), or NULL if it cannot be opened. */
static unsigned char *local_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    CHECK(buf != NULL);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The whole file `rel` of the share, read on the server's side. */
static unsigned char *server_file(const char *rel, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", share_dir, rel);
    return local_file(path, len);
}

static void options(smb3_connect_options *o, const char *pw) {
    OK(smb3_connect_options_init(o));
    o->user = user;
    o->domain = getenv("SMB_DOMAIN"); /* NULL: the server's own */
    o->password = pw;
}

struct counts {
    int calls;
    uint64_t last_bytes;
    uint64_t files_done;
    int cancel_after;
};

static int count_progress(const smb3_progress *p, void *data) {
    struct counts *c = data;
    c->calls++;
    CHECK(p->path != NULL);
    CHECK(p->file_bytes_done <= p->file_bytes_total);
    CHECK(p->bytes_done >= c->last_bytes); /* never goes back */
    c->last_bytes = p->bytes_done;
    c->files_done = p->files_done;
    return c->cancel_after > 0 && c->calls >= c->cancel_after;
}

static void test_arguments(void) {
    smb3_connect_options o;
    smb3_client *client = NULL;
    options(&o, password);
    CHECK(smb3_version() != NULL && strlen(smb3_version()) > 0);
    FAILS(smb3_connect(NULL, &o, &client), SMB3_ERR_INVALID_ARGUMENT, 0);
    CHECK(strstr(smb3_last_error_message(), "server") != NULL);
    CHECK(smb3_last_error_ntstatus() == 0);
    FAILS(smb3_connect(server, NULL, &client), SMB3_ERR_INVALID_ARGUMENT, 0);
    FAILS(smb3_connect(server, &o, NULL), SMB3_ERR_INVALID_ARGUMENT, 0);
    FAILS(smb3_connect("\xff\xfe", &o, &client), SMB3_ERR_INVALID_ARGUMENT, 0);
    CHECK(strstr(smb3_last_error_message(), "UTF-8") != NULL);
    o.dispatch = 77;
    FAILS(smb3_connect(server, &o, &client), SMB3_ERR_INVALID_ARGUMENT, 0);
    options(&o, password);
    o.user = NULL; /* a password needs a user */
    FAILS(smb3_connect(server, &o, &client), SMB3_ERR_INVALID_ARGUMENT, 0);
    options(&o, password);
    o.auth = 9;
    FAILS(smb3_connect(server, &o, &client), SMB3_ERR_INVALID_ARGUMENT, 0);
    CHECK(client == NULL);
    FAILS(smb3_connect_options_init(NULL), SMB3_ERR_INVALID_ARGUMENT, 0);
    CHECK(strcmp(smb3_error_kind_name(SMB3_ERR_AUTH), "SMB3_ERR_AUTH") == 0);
    /* Frees take NULL. */
    smb3_client_free(NULL);
    smb3_share_free(NULL);
    CHECK(smb3_file_close(NULL) == 0);
    smb3_dir_close(NULL);
    smb3_walk_free(NULL);
    smb3_string_free(NULL);
    smb3_buffer_free(NULL);
    printf("arguments: ok\n");
}

static void test_wrong_password(void) {
    smb3_connect_options o;
    smb3_client *client = NULL;
    options(&o, "not the password");
    FAILS(smb3_connect(server, &o, &client), SMB3_ERR_AUTH, STATUS_LOGON_FAILURE);
    CHECK(client == NULL);
    CHECK(smb3_last_error_errno() == EACCES);
    printf("wrong password: %s\n", smb3_last_error_message());
}

static void test_files(smb3_client *client, smb3_share *share) {
    smb3_share *missing = NULL;
    FAILS(smb3_client_share(client, "no-such-share", &missing), SMB3_ERR_NOT_FOUND,
          STATUS_BAD_NETWORK_NAME);

    smb3_file *f = NULL;
    FAILS(smb3_share_open(share, "capi/missing.bin", SMB3_OPEN_READ, NULL, &f),
          SMB3_ERR_NOT_FOUND, 0);
    FAILS(smb3_share_open(share, "missing.bin", SMB3_OPEN_READ, NULL, &f), SMB3_ERR_NOT_FOUND,
          STATUS_OBJECT_NAME_NOT_FOUND);
    CHECK(smb3_last_error_errno() == ENOENT);
    CHECK(strstr(smb3_last_error_message(), "missing.bin") != NULL);
    FAILS(smb3_share_open(share, "x", 1u << 30, NULL, &f), SMB3_ERR_INVALID_ARGUMENT, 0);
    FAILS(smb3_share_open(share, "x", SMB3_OPEN_READ, "yesterday", &f),
          SMB3_ERR_INVALID_ARGUMENT, 0);
    CHECK(f == NULL);

    OK(smb3_share_mkdir_all(share, "capi/sub/deeper"));
    FAILS(smb3_share_mkdir(share, "capi"), SMB3_ERR_EXISTS, STATUS_OBJECT_NAME_COLLISION);

    /* Write 5 MiB in one call (split over channels), then a patch at an odd offset. */
    size_t len = 5u << 20;
    unsigned char *data = malloc(len), *back = malloc(len);
    CHECK(data && back);
    fill(data, len, 1);
    OK(smb3_share_open(share, "capi/data.bin",
                       SMB3_OPEN_READ | SMB3_OPEN_WRITE | SMB3_OPEN_CREATE | SMB3_OPEN_TRUNCATE,
                       NULL, &f));
    OK(smb3_file_write_at(f, 0, data, len));
    fill(data + 1000001, 4096, 2);
    OK(smb3_file_write_at(f, 1000001, data + 1000001, 4096));
    OK(smb3_file_flush(f));
    size_t n = 0;
    OK(smb3_file_read_at(f, 0, back, len, &n));
    CHECK(n == len && memcmp(back, data, len) == 0);
    OK(smb3_file_read_at(f, len - 10, back, 100, &n));
    CHECK(n == 10 && memcmp(back, data + len - 10, 10) == 0); /* short only at the end */
    OK(smb3_file_read_at(f, len + 5, back, 100, &n));
    CHECK(n == 0);
    FAILS(smb3_file_read_at(f, 0, NULL, 10, &n), SMB3_ERR_INVALID_ARGUMENT, 0);
    smb3_stat st;
    OK(smb3_file_stat(f, &st));
    CHECK(st.size == len && st.file_type == SMB3_TYPE_FILE);
    OK(smb3_file_close(f));
    size_t on_disk_len = 0;
    unsigned char *on_disk = server_file("capi/data.bin", &on_disk_len);
    CHECK(on_disk && on_disk_len == len && memcmp(on_disk, data, len) == 0);
    free(on_disk);

    FAILS(smb3_share_open(share, "capi/data.bin", SMB3_OPEN_WRITE | SMB3_OPEN_CREATE_NEW, NULL,
                          &f),
          SMB3_ERR_EXISTS, STATUS_OBJECT_NAME_COLLISION);

    /* Truncate through a handle. */
    OK(smb3_share_open(share, "capi/short.bin", SMB3_OPEN_WRITE | SMB3_OPEN_CREATE, NULL, &f));
    OK(smb3_file_write_at(f, 0, data, 1000));
    OK(smb3_file_set_len(f, 10));
    OK(smb3_file_close(f));
    OK(smb3_share_stat(share, "capi/short.bin", &st));
    CHECK(st.size == 10);

    /* Times and attributes. */
    smb3_file_times t;
    memset(&t, 0, sizeof t);
    t.modified.sec = 1500000000;
    t.modified.nsec = 123456700;
    t.modified.is_set = true;
    t.accessed.sec = 1400000000;
    t.accessed.is_set = true;
    OK(smb3_share_set_times(share, "capi/short.bin", &t));
    OK(smb3_share_set_attributes(share, "capi/short.bin", SMB3_ATTR_HIDDEN | SMB3_ATTR_ARCHIVE));
    OK(smb3_share_stat(share, "capi/short.bin", &st));
    CHECK(st.modified.is_set && st.modified.sec == 1500000000 && st.modified.nsec == 123456700);
    CHECK(st.accessed.sec == 1400000000);
    CHECK(st.attributes & SMB3_ATTR_HIDDEN);
    OK(smb3_share_set_attributes(share, "capi/short.bin", 0));
    OK(smb3_share_stat(share, "capi/short.bin", &st));
    CHECK(!(st.attributes & SMB3_ATTR_HIDDEN));
    t.modified.nsec = 1000000000;
    FAILS(smb3_share_set_times(share, "capi/short.bin", &t), SMB3_ERR_INVALID_ARGUMENT, 0);

    /* Rename, with and without replacing. */
    OK(smb3_share_rename(share, "capi/short.bin", "capi/sub/short.bin", false));
    OK(smb3_share_open(share, "capi/other.bin", SMB3_OPEN_WRITE | SMB3_OPEN_CREATE, NULL, &f));
    OK(smb3_file_close(f));
    FAILS(smb3_share_rename(share, "capi/other.bin", "capi/sub/short.bin", false),
          SMB3_ERR_EXISTS, STATUS_OBJECT_NAME_COLLISION);
    OK(smb3_share_rename(share, "capi/other.bin", "capi/sub/short.bin", true));
    OK(smb3_share_stat(share, "capi/sub/short.bin", &st));
    CHECK(st.size == 0);

    free(data);
    free(back);
    printf("files: ok\n");
}

static void test_listing(smb3_share *share) {
    smb3_dir *dir = NULL;
    OK(smb3_share_list(share, "capi", &dir));
    const char *name;
    smb3_stat st;
    int rc, seen_data = 0, seen_sub = 0, entries = 0;
    while ((rc = smb3_dir_next(dir, &name, &st)) == 1) {
        entries++;
        if (strcmp(name, "data.bin") == 0) seen_data = st.size == (5u << 20);
        if (strcmp(name, "sub") == 0) seen_sub = st.file_type == SMB3_TYPE_DIRECTORY;
    }
    CHECK(rc == 0);
    CHECK(smb3_dir_next(dir, &name, &st) == 0); /* stays at the end */
    smb3_dir_close(dir);
    CHECK(entries == 2 && seen_data && seen_sub);
    FAILS(smb3_share_list(share, "capi/nope", &dir), SMB3_ERR_NOT_FOUND, 0);

    smb3_walk *walk = NULL;
    OK(smb3_share_walk(share, "capi", 0, &walk));
    const char *path;
    uint32_t depth;
    int found_deep = 0, found_short = 0, total = 0;
    while ((rc = smb3_walk_next(walk, &path, &depth, &st)) != 0) {
        CHECK(rc == 1);
        total++;
        if (strcmp(path, "capi/sub/deeper") == 0) found_deep = depth == 2;
        if (strcmp(path, "capi/sub/short.bin") == 0) found_short = depth == 2;
    }
    smb3_walk_free(walk);
    if (total != 4) fprintf(stderr, "walked %d entries\n", total);
    CHECK(total == 4 && found_deep && found_short); /* data.bin, sub, sub/deeper, sub/short.bin */
    printf("listing: ok (%d entries walked)\n", total);
}

static void test_streams_security_snapshots(smb3_share *share) {
    smb3_file *f = NULL;
    const char *meta = "kept beside the data";
    OK(smb3_share_open(share, "capi/data.bin:meta", SMB3_OPEN_WRITE | SMB3_OPEN_CREATE, NULL,
                       &f));
    OK(smb3_file_write_at(f, 0, meta, strlen(meta)));
    OK(smb3_file_close(f));
    smb3_stream *streams = NULL;
    size_t count = 0;
    OK(smb3_share_streams(share, "capi/data.bin", &streams, &count));
    int named = 0, unnamed = 0;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(streams[i].name, ":meta:$DATA") == 0) named = streams[i].size == strlen(meta);
        if (strcmp(streams[i].name, "::$DATA") == 0) unnamed = streams[i].size == (5u << 20);
    }
    smb3_streams_free(streams, count);
    CHECK(named && unnamed);
    char back[64];
    size_t n = 0;
    OK(smb3_share_open(share, "capi/data.bin:meta", SMB3_OPEN_READ, NULL, &f));
    OK(smb3_file_read_at(f, 0, back, sizeof back, &n));
    OK(smb3_file_close(f));
    CHECK(n == strlen(meta) && memcmp(back, meta, n) == 0);

    smb3_buffer sd = {0};
    OK(smb3_share_get_security(share, "capi/data.bin", SMB3_SECURITY_STANDARD, &sd));
    CHECK(sd.len >= 20 && sd.data != NULL);
    CHECK(sd.data[0] == 1); /* revision 1, self-relative (MS-DTYP 2.4.6) */
    OK(smb3_share_set_security(share, "capi/data.bin", SMB3_SECURITY_DACL, sd.data, sd.len));
    smb3_buffer again = {0};
    OK(smb3_share_open(share, "capi/data.bin", SMB3_OPEN_READ | SMB3_OPEN_READ_SECURITY, NULL,
                       &f));
    OK(smb3_file_get_security(f, SMB3_SECURITY_STANDARD, &again));
    OK(smb3_file_close(f));
    CHECK(again.len == sd.len && memcmp(again.data, sd.data, sd.len) == 0);
    smb3_buffer_free(&again);
    smb3_buffer_free(&sd);
    CHECK(sd.data == NULL && sd.len == 0);
    FAILS(smb3_share_get_security(share, "capi/data.bin", 0, &sd), SMB3_ERR_INVALID_ARGUMENT,
          0);

    /* The test harness made one snapshot (shadow_copy2) holding snap.txt = "as it was". */
    smb3_snapshot *snaps = NULL;
    count = 99;
    OK(smb3_share_snapshots(share, "", &snaps, &count));
    CHECK(count == 1 && strcmp(snaps[0].token, SNAPSHOT) == 0);
    CHECK(snaps[0].time.is_set && snaps[0].time.sec == 1763632800); /* 2025-11-20 10:00 UTC */
    smb3_snapshots_free(snaps, count);
    OK(smb3_share_open(share, "snap.txt", SMB3_OPEN_READ, SNAPSHOT, &f));
    OK(smb3_file_read_at(f, 0, back, sizeof back, &n));
    OK(smb3_file_close(f));
    CHECK(n == 9 && memcmp(back, "as it was", 9) == 0);
    FAILS(smb3_share_open(share, "snap.txt", SMB3_OPEN_WRITE, SNAPSHOT, &f),
          SMB3_ERR_INVALID_ARGUMENT, 0);
    smb3_share *then = NULL;
    OK(smb3_share_at_snapshot(share, SNAPSHOT, &then));
    smb3_stat snap_st;
    OK(smb3_share_stat(then, "snap.txt", &snap_st));
    CHECK(snap_st.size == 9);
    smb3_share_free(then);
    smb3_share *view = NULL;
    OK(smb3_share_at_snapshot(share, "@GMT-2001.02.03-04.05.06", &view));
    smb3_stat st;
    FAILS(smb3_share_stat(view, "capi/data.bin", &st), SMB3_ERR_NOT_FOUND, 0);
    FAILS(smb3_share_mkdir(view, "capi/new"), SMB3_ERR_INVALID_ARGUMENT, 0);
    smb3_share_free(view);
    printf("streams, security, snapshots: ok (%zu snapshots)\n", count);
}

static void test_server_copy(smb3_share *share) {
    uint64_t copied = 0;
    OK(smb3_share_copy_on_server(share, "capi/data.bin", share, "capi/copy.bin", &copied));
    CHECK(copied == (5u << 20));
    size_t a_len, b_len;
    unsigned char *a = server_file("capi/data.bin", &a_len), *b = server_file("capi/copy.bin", &b_len);
    CHECK(a && b && a_len == b_len && memcmp(a, b, a_len) == 0);
    free(a);
    free(b);

    smb3_file *src = NULL, *dst = NULL;
    OK(smb3_share_open(share, "capi/data.bin", SMB3_OPEN_READ, NULL, &src));
    OK(smb3_share_open(share, "capi/range.bin",
                       SMB3_OPEN_READ | SMB3_OPEN_WRITE | SMB3_OPEN_CREATE, NULL, &dst));
    OK(smb3_file_copy_range(dst, src, 4096, 0, 100000, &copied));
    CHECK(copied == 100000);
    unsigned char x[16], y[16];
    size_t n;
    OK(smb3_file_read_at(src, 4096 + 5000, x, 16, &n));
    OK(smb3_file_read_at(dst, 5000, y, 16, &n));
    CHECK(n == 16 && memcmp(x, y, 16) == 0);
    OK(smb3_file_close(src));
    OK(smb3_file_close(dst));
    FAILS(smb3_share_copy_on_server(share, "capi/none.bin", share, "capi/c2.bin", &copied),
          SMB3_ERR_NOT_FOUND, STATUS_OBJECT_NAME_NOT_FOUND);
    printf("server-side copy: ok\n");
}

static void test_copies(smb3_share *share, const char *tmp) {
    char local[4096], up[4096];
    snprintf(local, sizeof local, "%s/down.bin", tmp);
    struct counts c = {0};
    OK(smb3_download(share, "capi/data.bin", local, SMB3_COPY_PRESERVE_TIMES, count_progress,
                     &c, NULL));
    CHECK(c.calls >= 2 && c.last_bytes == (5u << 20) && c.files_done == 1);
    size_t l_len, s_len;
    unsigned char *l = local_file(local, &l_len), *s = server_file("capi/data.bin", &s_len);
    CHECK(l && s && l_len == s_len && memcmp(l, s, l_len) == 0);
    free(l);
    free(s);
    /* Exists: refused without OVERWRITE; replaced with it. */
    FAILS(smb3_download(share, "capi/data.bin", local, 0, NULL, NULL, NULL), SMB3_ERR_LOCAL_IO, 0);
    CHECK(smb3_last_error_errno() == EEXIST);
    OK(smb3_download(share, "capi/data.bin", local, SMB3_COPY_OVERWRITE, NULL, NULL, NULL));
    FAILS(smb3_download(share, "capi/data.bin", local, 1u << 20, NULL, NULL, NULL),
          SMB3_ERR_INVALID_ARGUMENT, 0);

    /* Cancelled by the callback: an error, and no partial file left. */
    snprintf(local, sizeof local, "%s/cancelled.bin", tmp);
    struct counts cancel = {0};
    cancel.cancel_after = 2;
    FAILS(smb3_download(share, "capi/data.bin", local, 0, count_progress, &cancel, NULL),
          SMB3_ERR_CANCELLED, 0);
    CHECK(access(local, F_OK) != 0);

    /* Cancelled by a token before it starts. */
    smb3_cancel *token = smb3_cancel_new();
    smb3_cancel_request(token);
    FAILS(smb3_download(share, "capi/data.bin", local, 0, NULL, NULL, token), SMB3_ERR_CANCELLED,
          0);
    smb3_cancel_free(token);

    /* Missing source: the code and NTSTATUS, no local file. */
    FAILS(smb3_download(share, "capi/none.bin", local, 0, NULL, NULL, NULL), SMB3_ERR_NOT_FOUND,
          STATUS_OBJECT_NAME_NOT_FOUND);
    CHECK(access(local, F_OK) != 0);

    /* Upload: back to the share under another name, byte-exact, with the local times. */
    snprintf(up, sizeof up, "%s/down.bin", tmp);
    OK(smb3_upload(share, up, "capi/up.bin", SMB3_COPY_PRESERVE_TIMES, NULL, NULL, NULL));
    l = local_file(up, &l_len);
    s = server_file("capi/up.bin", &s_len);
    CHECK(l && s && l_len == s_len && memcmp(l, s, l_len) == 0);
    free(l);
    free(s);
    FAILS(smb3_upload(share, up, "capi/up.bin", 0, NULL, NULL, NULL), SMB3_ERR_EXISTS,
          STATUS_OBJECT_NAME_COLLISION);

    /* Trees, down and up again. */
    snprintf(local, sizeof local, "%s/tree", tmp);
    struct counts tc = {0};
    OK(smb3_download_tree(share, "capi", local, SMB3_COPY_PRESERVE_TIMES | SMB3_COPY_BACKUP_INTENT,
                          count_progress, &tc, NULL));
    CHECK(tc.files_done == 5); /* data, copy, range, up, sub/short */
    snprintf(up, sizeof up, "%s/tree/sub/deeper", tmp);
    struct stat ls;
    CHECK(stat(up, &ls) == 0 && S_ISDIR(ls.st_mode));
    snprintf(up, sizeof up, "%s/tree/data.bin", tmp);
    l = local_file(up, &l_len);
    s = server_file("capi/data.bin", &s_len);
    CHECK(l && s && l_len == s_len && memcmp(l, s, l_len) == 0);
    free(l);
    free(s);
    OK(smb3_upload_tree(share, local, "capi-restored", SMB3_COPY_PRESERVE_TIMES, NULL, NULL,
                        NULL));
    l = server_file("capi-restored/sub/short.bin", &l_len);
    CHECK(l != NULL && l_len == 0);
    free(l);
    l = server_file("capi-restored/data.bin", &l_len);
    s = server_file("capi/data.bin", &s_len);
    CHECK(l && s && l_len == s_len && memcmp(l, s, l_len) == 0);
    free(l);
    free(s);
    smb3_stat st;
    OK(smb3_share_stat(share, "capi-restored/sub/deeper", &st));
    CHECK(st.file_type == SMB3_TYPE_DIRECTORY);
    printf("copies: ok (%d progress calls for the tree)\n", tc.calls);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s SERVER SHARE USER PASSWORD SHARE_DIR\n", argv[0]);
        return 2;
    }
    server = argv[1];
    share_name = argv[2];
    user = argv[3];
    password = argv[4];
    share_dir = argv[5];
    char tmp[] = "/tmp/smb3-capi-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);

    test_arguments();
    test_wrong_password();

    smb3_connect_options o;
    options(&o, password);
    smb3_client *client = NULL;
    OK(smb3_connect(server, &o, &client));
    CHECK(client != NULL);
    smb3_share *share = NULL;
    OK(smb3_client_share(client, share_name, &share));
    smb3_client_wait_for_channels(client, 5000);
    int channels = smb3_client_channels(client);
    CHECK(channels >= 1);
    printf("connected: %d channel(s)\n", channels);

    test_files(client, share);
    test_listing(share);
    test_streams_security_snapshots(share);
    test_server_copy(share);
    test_copies(share, tmp);

    /* The client handle may go first: the share keeps the session alive until it is freed. */
    smb3_client_free(client);
    smb3_stat st;
    OK(smb3_share_stat(share, "capi/data.bin", &st));
    CHECK(st.size == (5u << 20));
    smb3_share_free(share);

    /* A second session, ended with LOGOFF. */
    OK(smb3_connect(server, &o, &client));
    OK(smb3_client_logoff(client));
    smb3_client_free(client);

    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
    printf("ALL OK (%d checks)\n", checks);
    return 0;
}
