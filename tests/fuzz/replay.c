/* replay.c - runs a fuzz target's LLVMFuzzerTestOneInput over files and
 * folders of files, without libFuzzer, so that 'make check' replays every
 * target's corpus and crash reproducers with the project's own compiler
 * (and under ASan+UBSan in the asan build).  A property that fails aborts,
 * so the exit status says whether all passed.
 *
 *   replay PATH...   prints "replayed N inputs" */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t replayed;

static void replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        exit(1);
    }
    unsigned char *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? cap * 2 : 65536;
            unsigned char *p = realloc(data, cap);
            if (!p) {
                fprintf(stderr, "%s: out of memory\n", path);
                exit(1);
            }
            data = p;
        }
        size_t n = fread(data + size, 1, cap - size, fp);
        size += n;
        if (n == 0) break;
    }
    fclose(fp);
    /* an exact-size copy, so that ASan sees a read one byte past the end */
    unsigned char *exact = malloc(size ? size : 1);
    if (!exact) exit(1);
    memcpy(exact, data, size);
    free(data);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    replayed++;
}

static void replay_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        exit(1);
    }
    if (!S_ISDIR(sb.st_mode)) {
        replay_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        exit(1);
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *child = malloc(len);
        if (!child) exit(1);
        snprintf(child, len, "%s/%s", path, e->d_name);
        replay_path(child);
        free(child);
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) replay_path(argv[i]);
    printf("replayed %zu inputs\n", replayed);
    return 0;
}
