/*
 * backup: copy a directory tree of an SMB share into a local directory, as a backup
 * program does: the share's files are read with backup intent, every channel of a
 * multichannel session in use, and the copies keep their access and modification times.
 * Uses only <smb3.h> (libsmb3: the C API of smb3-client).
 *
 *   SMB_PASSWORD=... backup [-q] [-j] [-c MAX_CHANNELS] smb://[DOMAIN;]USER@HOST/SHARE[/DIR] DEST
 *
 * Build against an installed libsmb3:
 *   cc -O2 -o backup backup.c $(pkg-config --cflags --libs smb3)
 *
 * Prints the files as they complete (unless -q) and one summary line at the end; with -j the
 * summary is JSON ({"files":N,"bytes":N,"seconds":S,"channels":N}). Exit status: 0 done,
 * 1 the backup failed (the message says why, with the NTSTATUS), 2 usage.
 */
#include <smb3.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct state {
    int quiet;
    uint64_t files; /* finished */
    uint64_t bytes; /* copied */
    double last_line;
};

static smb3_cancel *cancel_token;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Called on this thread by smb3_download_tree. Returning non-zero would cancel. */
static int on_progress(const smb3_progress *p, void *data) {
    struct state *s = data;
    int finished = p->files_done > s->files;
    s->files = p->files_done;
    s->bytes = p->bytes_done;
    if (s->quiet) return 0;
    if (finished) {
        printf("  %s (%llu bytes)\n", p->path, (unsigned long long)p->file_bytes_total);
    }
    double t = now();
    if (t - s->last_line > 1.0) {
        s->last_line = t;
        fprintf(stderr, "  ... %llu of %llu files, %.1f MiB\n",
                (unsigned long long)p->files_done, (unsigned long long)p->files_total,
                (double)p->bytes_done / (1 << 20));
    }
    return 0;
}

/* Ctrl-C: ask the copy to stop at its next chunk (one atomic store: safe in a handler). */
static void on_interrupt(int sig) {
    (void)sig;
    smb3_cancel_request(cancel_token);
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "backup: %s: %s [%s, NTSTATUS 0x%08X]\n", what, smb3_last_error_message(),
            smb3_error_kind_name(rc), smb3_last_error_ntstatus());
    return 1;
}

int main(int argc, char **argv) {
    int opt, json = 0;
    unsigned max_channels = 0;
    struct state state = {0};
    while ((opt = getopt(argc, argv, "qjc:")) != -1) {
        switch (opt) {
        case 'q': state.quiet = 1; break;
        case 'j': json = 1; break;
        case 'c': max_channels = (unsigned)strtoul(optarg, NULL, 10); break;
        default: goto usage;
        }
    }
    if (argc - optind != 2) goto usage;
    const char *url = argv[optind], *dest = argv[optind + 1];
    const char *password = getenv("SMB_PASSWORD");
    if (!password) {
        fprintf(stderr, "backup: set SMB_PASSWORD\n");
        return 2;
    }

    smb3_connect_options options;
    smb3_connect_options_init(&options);
    options.password = password;
    options.max_channels = max_channels;
    /* Channels that bind while the copy runs catch up (smbcp does the same). */
    options.dispatch = SMB3_DISPATCH_LEAST_LOADED;

    smb3_client *client = NULL;
    smb3_share *share = NULL;
    char *dir = NULL;
    int rc = smb3_connect_url(url, &options, &client, &share, &dir);
    if (rc != SMB3_OK) return fail(url, rc);

    cancel_token = smb3_cancel_new();
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);

    double start = now();
    rc = smb3_download_tree(share, dir, dest, SMB3_COPY_BACKUP_INTENT | SMB3_COPY_PRESERVE_TIMES,
                            on_progress, &state, cancel_token);
    double seconds = now() - start;
    int channels = smb3_client_channels(client);
    int status = 0;
    if (rc != SMB3_OK) {
        status = fail(dest, rc);
    } else if (json) {
        printf("{\"files\":%llu,\"bytes\":%llu,\"seconds\":%.3f,\"channels\":%d}\n",
               (unsigned long long)state.files, (unsigned long long)state.bytes, seconds,
               channels);
    } else {
        printf("backup of %s into %s: %llu files, %llu bytes in %.2f s over %d channel(s)\n", url,
               dest, (unsigned long long)state.files, (unsigned long long)state.bytes, seconds,
               channels);
    }
    smb3_string_free(dir);
    smb3_share_free(share);
    smb3_client_free(client);
    smb3_cancel_free(cancel_token);
    return status;

usage:
    fprintf(stderr, "usage: SMB_PASSWORD=... %s [-q] [-j] [-c MAX_CHANNELS] "
                    "smb://[DOMAIN;]USER@HOST/SHARE[/DIR] DEST\n", argv[0]);
    return 2;
}
