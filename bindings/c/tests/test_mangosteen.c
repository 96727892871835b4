/* Mangosteen's callback API from C (SPEC M1): the paper's Listing 2 key-value store (an
 * array of fixed-size values indexed by number) made durable by implementing Listing 1's
 * callbacks. Local mode: puts and gets through pmkv_mg_client_cmd, a refused request, a
 * reopen that finds every acknowledged put. RPC mode: pmkv_mg_serve on a thread, a TCP
 * client speaking the runtime's frames. Usage: test_mangosteen DIR. */
#define _DEFAULT_SOURCE
#include "pmkv.h"
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define VAL_SZ 16
#define SLOTS 1000


/* Listing 2's command and client. */
typedef struct kv_cmd {
    enum { PUT, GET } type;
    unsigned index;
    char value[VAL_SZ];
} kv_cmd;

typedef struct kv_client {
    int id;
    kv_cmd cur;
    char response[VAL_SZ];
    size_t response_len;
} kv_client;

static int clients_alive = 0;

static void *init_client(void *params) {
    kv_client *c = calloc(1, sizeof *c);
    c->id = (int)(size_t)params;
    __atomic_add_fetch(&clients_alive, 1, __ATOMIC_SEQ_CST);
    return c;
}

static void destroy_client(void *c) {
    __atomic_sub_fetch(&clients_alive, 1, __ATOMIC_SEQ_CST);
    free(c);
}

/* Wire format: 'P' index(4, LE) value(VAL_SZ) | 'G' index(4, LE). */
static int deserialize_request(void *cp, const uint8_t *req, size_t len) {
    kv_client *c = cp;
    if (len < 5) return 1;
    uint32_t index;
    memcpy(&index, req + 1, 4);
    if (index >= SLOTS) return 2;
    c->cur.index = index;
    if (req[0] == 'P' && len == 5 + VAL_SZ) {
        c->cur.type = PUT;
        memcpy(c->cur.value, req + 5, VAL_SZ);
        return 0;
    }
    if (req[0] == 'G' && len == 5) {
        c->cur.type = GET;
        return 0;
    }
    return 3;
}

static bool is_read_only(void *cp) { return ((kv_client *)cp)->cur.type == GET; }

/* Listing 2's getValueAtIndex / putValueAtIndex: plain loads and stores into the state. */
static void process_request(void *cp, uint8_t *region, size_t region_len) {
    kv_client *c = cp;
    char *store = (char *)region;
    if ((size_t)(c->cur.index + 1) * VAL_SZ > region_len) {
        c->response_len = 0;
        return;
    }
    if (c->cur.type == PUT) {
        memcpy(store + c->cur.index * VAL_SZ, c->cur.value, VAL_SZ);
        memcpy(c->response, "OK", 2);
        c->response_len = 2;
    } else {
        memcpy(c->response, store + c->cur.index * VAL_SZ, VAL_SZ);
        c->response_len = VAL_SZ;
    }
}

static const uint8_t *get_response(void *cp, size_t *len) {
    kv_client *c = cp;
    *len = c->response_len;
    return (const uint8_t *)c->response;
}

static const pmkv_mg_callbacks CALLBACKS = {
    .init_client = init_client,
    .destroy_client = destroy_client,
    .deserialize_request = deserialize_request,
    .is_read_only = is_read_only,
    .process_request = process_request,
    .get_response = get_response,
};

static size_t put_req(uint8_t *b, uint32_t index, const char *value) {
    b[0] = 'P';
    memcpy(b + 1, &index, 4);
    memset(b + 5, 0, VAL_SZ);
    memcpy(b + 5, value, strlen(value) < VAL_SZ ? strlen(value) : VAL_SZ);
    return 5 + VAL_SZ;
}

static size_t get_req(uint8_t *b, uint32_t index) {
    b[0] = 'G';
    memcpy(b + 1, &index, 4);
    return 5;
}

static void value_of(unsigned i, char *out) { snprintf(out, VAL_SZ, "v%u", i * 7); }

static void local_mode(const char *path) {
    pmkv_mg_options o = {0};
    o.create = 1;
    o.region_size = SLOTS * VAL_SZ;
    pmkv_mg *m = NULL;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, (void *)1, &m) == 0);
    CHECK(pmkv_mg_region_size(m) == SLOTS * VAL_SZ);
    pmkv_mg_client *c = NULL;
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    CHECK(clients_alive == 1);
    uint8_t req[64];
    uint8_t *resp;
    size_t resp_len;
    for (unsigned i = 0; i < SLOTS; i += 3) {
        char v[VAL_SZ];
        value_of(i, v);
        CHECK(pmkv_mg_client_cmd(m, c, req, put_req(req, i, v), &resp, &resp_len) == 0);
        CHECK(resp_len == 2 && memcmp(resp, "OK", 2) == 0);
        pmkv_free(resp, resp_len);
    }
    CHECK(pmkv_mg_client_cmd(m, c, req, get_req(req, 3), &resp, &resp_len) == 0);
    CHECK(resp_len == VAL_SZ && strcmp((char *)resp, "v21") == 0);
    pmkv_free(resp, resp_len);
    /* Refused requests: an error, nothing run. */
    CHECK(pmkv_mg_client_cmd(m, c, req, get_req(req, SLOTS + 5), &resp, &resp_len) == PMKV_E_INVALID_ARGUMENT);
    CHECK(strstr(pmkv_last_error(), "refused") != NULL);
    CHECK(pmkv_mg_client_cmd(m, c, (const uint8_t *)"X", 1, &resp, &resp_len) == PMKV_E_INVALID_ARGUMENT);
    CHECK(pmkv_mg_client_cmd(NULL, c, req, 5, &resp, &resp_len) == PMKV_E_INVALID_ARGUMENT);
    pmkv_mg_client_close(m, c);
    CHECK(clients_alive == 0);
    CHECK(pmkv_mg_close(m) == 0);

    /* Reopen: every acknowledged put is there, untouched slots are zero. */
    m = NULL;
    CHECK(pmkv_mg_open(path, NULL, &CALLBACKS, NULL, &m) == 0);
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    for (unsigned i = 0; i < SLOTS; i++) {
        CHECK(pmkv_mg_client_cmd(m, c, req, get_req(req, i), &resp, &resp_len) == 0);
        CHECK(resp_len == VAL_SZ);
        char want[VAL_SZ] = {0};
        if (i % 3 == 0) value_of(i, want);
        CHECK(memcmp(resp, want, VAL_SZ) == 0);
        pmkv_free(resp, resp_len);
    }
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);

    /* Bad input at open: missing callbacks, a pool that is not Mangosteen's, no pool. */
    pmkv_mg_callbacks partial = CALLBACKS;
    partial.get_response = NULL;
    CHECK(pmkv_mg_open(path, NULL, &partial, NULL, &m) == PMKV_E_INVALID_ARGUMENT);
    char missing[4096];
    snprintf(missing, sizeof missing, "%s.none", path);
    CHECK(pmkv_mg_open(missing, NULL, &CALLBACKS, NULL, &m) == PMKV_E_NOT_FOUND);
    CHECK(pmkv_mg_close(NULL) == 0);
}

/* RPC mode. */
static uint16_t rpc_port = 0;
static void on_ready(uint16_t port, void *arg) {
    (void)arg;
    __atomic_store_n(&rpc_port, port, __ATOMIC_SEQ_CST);
}
static void *serve(void *m) {
    pmkv_mg_serve(m, 0, on_ready, NULL);
    return NULL;
}

static void send_frame(int fd, const uint8_t *b, uint32_t n) {
    CHECK(write(fd, &n, 4) == 4);
    CHECK(write(fd, b, n) == (ssize_t)n);
}

static size_t recv_frame(int fd, uint8_t *b, size_t cap) {
    uint32_t n;
    size_t got = 0;
    while (got < 4) {
        ssize_t r = read(fd, (uint8_t *)&n + got, 4 - got);
        CHECK(r > 0);
        got += (size_t)r;
    }
    CHECK(n <= cap);
    got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        CHECK(r > 0);
        got += (size_t)r;
    }
    return n;
}

static void rpc_mode(const char *path) {
    pmkv_mg *m = NULL;
    pmkv_mg_options o = {0};
    o.background = 1;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, (void *)2, &m) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, serve, m) == 0);
    CHECK(pthread_detach(t) == 0);
    while (__atomic_load_n(&rpc_port, __ATOMIC_SEQ_CST) == 0) usleep(1000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(rpc_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    uint8_t req[64], resp[256];
    send_frame(fd, req, (uint32_t)put_req(req, 999, "over rpc"));
    size_t n = recv_frame(fd, resp, sizeof resp);
    CHECK(n == 3 && resp[0] == 0 && memcmp(resp + 1, "OK", 2) == 0);
    send_frame(fd, req, (uint32_t)get_req(req, 999));
    n = recv_frame(fd, resp, sizeof resp);
    CHECK(n == 1 + VAL_SZ && resp[0] == 0 && strcmp((char *)resp + 1, "over rpc") == 0);
    send_frame(fd, req, (uint32_t)get_req(req, 3));
    n = recv_frame(fd, resp, sizeof resp);
    CHECK(n == 1 + VAL_SZ && strcmp((char *)resp + 1, "v21") == 0);
    send_frame(fd, (const uint8_t *)"?", 1);
    n = recv_frame(fd, resp, sizeof resp);
    CHECK(n > 1 && resp[0] == 1);
    close(fd);
    /* The server thread runs until the process ends (pmkv_mg_serve returns only on an
     * error); the acknowledged put is durable already. */
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    char path[4096];
    snprintf(path, sizeof path, "%s/mg.pool", argv[1]);
    unlink(path);
    local_mode(path);
    rpc_mode(path);
    printf("mangosteen C API: all checks passed\n");
    return 0;
}
