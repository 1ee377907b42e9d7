/* cushim serve --listen ADDR:PORT: HTTP GET /metrics in the Prometheus text format for every
 * process the caller may see, served by libmicrohttpd. Runs until SIGINT or SIGTERM. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

#ifdef CUSHIM_HAVE_MICROHTTPD
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <net/if.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/prometheus.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

/* Every connection gets CONN_DEADLINE_S from its start, or from its last request: a client that
 * sends a byte now and then (libmicrohttpd's timeout counts idle time only) is cut off then, so
 * that slow clients cannot hold every slot and lock a scraper out. */
#define CONN_LIMIT 256
#define CONN_DEADLINE_S 10
struct conn_slot {
    struct MHD_Connection *c; /* NULL: free */
    int fd;
    time_t since;             /* its start, or its last request (CLOCK_MONOTONIC s) */
};
static struct conn_slot conns[CONN_LIMIT];
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;

static time_t now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec;
}

/* libmicrohttpd says a connection opened, or closed (before it closes its socket: a slot's fd is
 * never another connection's). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)socket_context;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&conns_lock);
    for (int i = 0; i < CONN_LIMIT; i++) {
        if (toe == MHD_CONNECTION_NOTIFY_STARTED && !conns[i].c && info) {
            conns[i] = (struct conn_slot){c, info->connect_fd, now_s()};
            break;
        }
        if (toe == MHD_CONNECTION_NOTIFY_CLOSED && conns[i].c == c) {
            conns[i].c = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&conns_lock);
}

static void request_seen(struct MHD_Connection *c)
{
    pthread_mutex_lock(&conns_lock);
    for (int i = 0; i < CONN_LIMIT; i++)
        if (conns[i].c == c)
            conns[i].since = now_s();
    pthread_mutex_unlock(&conns_lock);
}

/* Shuts down (libmicrohttpd then closes) every connection past its deadline. */
static void cut_slow_connections(void)
{
    time_t now = now_s();
    pthread_mutex_lock(&conns_lock);
    for (int i = 0; i < CONN_LIMIT; i++)
        if (conns[i].c && now - conns[i].since >= CONN_DEADLINE_S && conns[i].fd >= 0) {
            shutdown(conns[i].fd, SHUT_RDWR);
            conns[i].fd = -1;
        }
    pthread_mutex_unlock(&conns_lock);
}

/* The last /metrics answer, served again to requests within CACHE_NS of its making: a scan reads
 * every segment, so a flood of requests (or many scrapers at once) costs one scan a second, not
 * one each, and cannot starve a real scrape. Only libmicrohttpd's one thread touches it. */
#define CACHE_NS 1000000000ull
/* A body that every response made of it shares (libmicrohttpd's MUST_COPY gave each connection
 * its own copy: 40 scrapers at once over 700 processes took the exporter from 66 MB to 300 MB),
 * freed when the cache and the last response that sends it let it go. */
#if MHD_VERSION >= 0x00096000
#define SHARED_BODY 1
#endif
struct shared_body {
    unsigned refs;
    char data[];
};

static struct shared_body *body_of(void *data)
{
    return (struct shared_body *)((char *)data - offsetof(struct shared_body, data));
}

/* A response's (or the cache's) hold on a body ends; libmicrohttpd calls it with the data. */
static void body_release(void *data)
{
    struct shared_body *b = body_of(data);
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(b);
}

static struct {
    char *body; /* the data of a shared_body (NULL: none) */
    size_t len;
    unsigned status;
    uint64_t made_ns; /* CLOCK_MONOTONIC; 0: none yet */
} cache;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* --command-label: what the metrics' command label holds. */
static enum prom_command command_label;

/* The /metrics body and status, from the cache when it is fresh, else from a new scan. */
static void metrics_answer(void)
{
    if (cache.made_ns && now_ns() - cache.made_ns < CACHE_NS)
        return;
    char *body = NULL;
    size_t len = 0;
    unsigned status = MHD_HTTP_OK;
    FILE *f = open_memstream(&body, &len);
    struct proc_list l;
    proc_list_collect(&l, NULL, 0, 0);
    if (f && l.dir_unreadable) {
        /* Not "no process": the scrape fails, and Prometheus marks the target down. */
        fprintf(f, "cushim: cannot read the segment directory %s\n", seg_dir());
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
    } else if (f) {
        prometheus_write(f, &l, command_label);
    }
    /* A body the stream could not hold entirely (out of memory) is not served as a whole one. */
    bool whole = f && !ferror(f);
    if (f && fclose(f) != 0)
        whole = false;
    proc_list_free(&l);
    struct shared_body *shared = whole && body ? malloc(offsetof(struct shared_body, data) + len + 1) : NULL;
    if (shared) {
        shared->refs = 1; /* the cache's */
        memcpy(shared->data, body, len + 1);
    }
    free(body);
    if (cache.body)
        body_release(cache.body);
    cache.body = shared ? shared->data : NULL;
    cache.len = shared ? len : 0;
    cache.status = shared ? status : MHD_HTTP_INTERNAL_SERVER_ERROR;
    cache.made_ns = now_ns();
}

static MHD_RESULT answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                         const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    (void)upload;
    /* libmicrohttpd calls once with the headers, then with any body, then once more: answering
     * only then keeps the connection open for the next request (HTTP/1.1 keep-alive: a response
     * queued on the first call is an early one, and the connection is closed after it). */
    static int headers_seen;
    if (*state == NULL) {
        *state = &headers_seen;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a body (a POST's) is not read */
        return MHD_YES;
    }
    struct MHD_Response *r;
    unsigned status = MHD_HTTP_OK;
    request_seen(c);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        static const char msg[] = "only GET /metrics\n";
        r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Allow", "GET, HEAD");
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/metrics") != 0) {
        static const char msg[] = "cushim: metrics are at /metrics\n";
        r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_FOUND;
    } else {
        metrics_answer();
        status = cache.status;
#ifdef SHARED_BODY
        if (cache.body) {
            __atomic_add_fetch(&body_of(cache.body)->refs, 1, __ATOMIC_ACQ_REL);
            r = MHD_create_response_from_buffer_with_free_callback(cache.len, cache.body, body_release);
            if (!r)
                body_release(cache.body);
        } else {
            r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        }
#else
        r = MHD_create_response_from_buffer(cache.len, cache.body ? cache.body : (void *)"", MHD_RESPMEM_MUST_COPY);
#endif
    }
    if (r)
        MHD_add_response_header(r, "Content-Type", status == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8"
                                                                         : "text/plain; charset=utf-8");
    MHD_RESULT ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* The request path as sent, not unescaped: /metrics is the only path served, and "/metrics%00"
 * (or "/%6detrics") is not it (libmicrohttpd's own unescaping would make it "/metrics"). */
static size_t keep_escapes(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

/* ADDR:PORT, [V6ADDR]:PORT or :PORT (every address, IPv4 and IPv6). Addresses are numeric; an
 * IPv6 one may name its interface (fe80::1%eth0, RFC 4007), and an IPv4-mapped one
 * (::ffff:127.0.0.1, RFC 4291 2.5.5.2) is its IPv4 address. */
/* The address parse_listen made, as a URL's host and port: "127.0.0.1:9400", "[::1]:9400",
 * "[fe80::1%eth0]:9400" (what is served, not the words typed: 09400, ::ffff:127.0.0.1). */
static void listen_shown(const struct sockaddr_storage *ss, int v6, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?", zone[IF_NAMESIZE + 1] = "";
    if (v6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        if (a->sin6_scope_id && if_indextoname(a->sin6_scope_id, zone + 1))
            zone[0] = '%';
        snprintf(out, len, "[%s%s]:%u", host, zone, (unsigned)ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, len, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    }
}

static int parse_listen(const char *s, struct sockaddr_storage *ss, int *v6, int *any)
{
    *any = 0;
    char host[128];
    const char *colon = strrchr(s, ':');
    char *end;
    if (!colon || colon - s >= (long)sizeof host)
        return -1;
    /* Digits only: strtol would take "+9400" and " 9400". */
    if (colon[1] < '0' || colon[1] > '9')
        return -1;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(ss, 0, sizeof *ss);
    if (host[0] == '[') {
        size_t n = strlen(host);
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        if (n < 2 || host[n - 1] != ']')
            return -1;
        host[n - 1] = '\0';
        struct addrinfo hints = {.ai_family = AF_INET6, .ai_flags = AI_NUMERICHOST}, *res = NULL;
        if (getaddrinfo(host + 1, NULL, &hints, &res) != 0 || !res) {
            /* An address that is one but for its zone: the interface is what is wrong. */
            char *zone = strchr(host + 1, '%');
            if (zone) {
                *zone = '\0';
                struct in6_addr probe;
                if (inet_pton(AF_INET6, host + 1, &probe) == 1)
                    return if_nametoindex(zone + 1) ? -3 : -2;
            }
            return -1;
        }
        memcpy(a, res->ai_addr, sizeof *a);
        freeaddrinfo(res);
        a->sin6_port = htons((uint16_t)port);
        if (!IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
            *v6 = 1;
            return 0;
        }
        struct in_addr v4;
        memcpy(&v4, &a->sin6_addr.s6_addr[12], sizeof v4);
        memset(ss, 0, sizeof *ss);
        ((struct sockaddr_in *)ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
        ((struct sockaddr_in *)ss)->sin_addr = v4;
        *v6 = 0;
        return 0;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    *v6 = 0;
    if (host[0] == '\0') {
        *any = 1;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        return 0;
    }
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

int cmd_serve(int argc, char **argv)
{
    const char *listen = NULL, *given, *command_given = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: cushim serve --listen ADDR:PORT [--command-label full|name|none]\n\nServes GET "
                   "/metrics (Prometheus text format) for every process under cushim\nthat this user may see "
                   "(everyone's as root). ADDR:PORT is e.g. 127.0.0.1:9400,\n[::1]:9400, [fe80::1%%eth0]:9400 or "
                   ":9400 (all addresses). A scrape within\n1 s of the last gets that one's answer.\n"
                   "  --command-label full|name|none\n"
                   "        what each sample's command label holds: the command line's first 64\n"
                   "        bytes (full, the default: every local user reads the metrics on\n"
                   "        loopback, arguments included), the program's file name alone (name),\n"
                   "        or no command label (none)\n");
            return 0;
        }
        int got = cli_option_value(argc, argv, &i, "--listen", "ADDR:PORT", &given);
        if (got < 0)
            return EXIT_USAGE;
        if (got)
            cli_say_replaced("--listen", &listen, given);
        if (!got && (got = cli_option_value(argc, argv, &i, "--command-label", "full, name or none", &given)) != 0) {
            if (got < 0 || prometheus_parse_command_label("--command-label", given, &command_label) < 0)
                return EXIT_USAGE;
            cli_say_replaced("--command-label", &command_given, given);
        }
        if (!got) {
            cli_bad_word("serve", argv[i], "cushim serve --listen ADDR:PORT [--command-label full|name|none]");
            return EXIT_USAGE;
        }
    }
    struct sockaddr_storage ss;
    int v6 = 0, any = 0;
    if (!listen) {
        cli_error("serve needs --listen ADDR:PORT (e.g. 127.0.0.1:9400, [::1]:9400, :9400 for every address)");
        return EXIT_USAGE;
    }
    int parsed = parse_listen(listen, &ss, &v6, &any);
    if (parsed == -2) {
        cli_error("--listen %s: no network interface of that name here (`ip link` lists them)", cli_shown(listen));
        return EXIT_USAGE;
    }
    if (parsed == -3) {
        cli_error("--listen %s: an interface (%%NAME) goes only with a link-local address (fe80::/10)",
                  cli_shown(listen));
        return EXIT_USAGE;
    }
    if (parsed != 0) {
        cli_error("--listen needs ADDR:PORT with a numeric address and a port 1..65535 (e.g. "
                  "127.0.0.1:9400, [::1]:9400, :9400 for every address), got %s",
                  cli_shown(listen));
        return EXIT_USAGE;
    }
    /* SIGINT/SIGTERM/SIGHUP end the server, taken by sigwait below: blocked first, so that neither
     * libmicrohttpd's thread (which inherits the mask) nor an early signal, before the wait, can
     * take the default action. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP); /* a hangup (the terminal closed, a reload) also stops it, cleanly */
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    /* Idle or slow clients cannot hold the exporter for long: 10 s per connection idle
     * (libmicrohttpd) and from its start or last request (CONN_DEADLINE_S, cut_slow_connections),
     * 256 connections, 64 per address (every local client shares 127.0.0.1, so a few idle ones
     * must not lock a local scraper out). libmicrohttpd's own log stays off (cushim reports in
     * its own words). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | (any ? MHD_USE_DUAL_STACK : v6 ? MHD_USE_IPv6 : 0);
    uint16_t port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    struct MHD_Daemon *d = any ? MHD_start_daemon(flags, port, NULL, NULL, answer, NULL,
                                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_DEADLINE_S,
                                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
                                                  MHD_OPTION_PER_IP_CONNECTION_LIMIT, 64u,
                                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                                                  MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL, MHD_OPTION_END)
                               : MHD_start_daemon(flags, port, NULL, NULL, answer, NULL,
                                                  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_DEADLINE_S,
                                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
                                                  MHD_OPTION_PER_IP_CONNECTION_LIMIT, 64u,
                                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                                                  MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL, MHD_OPTION_END);
    char shown[INET6_ADDRSTRLEN + IF_NAMESIZE + 16];
    if (any)
        snprintf(shown, sizeof shown, ":%u", (unsigned)port);
    else
        listen_shown(&ss, v6, shown, sizeof shown);
    if (!d) {
        cli_error("cannot listen on %s: %s", shown,
                  errno ? strerror(errno) : "address in use or not an address of this machine");
        return EXIT_USAGE;
    }
    if (any)
        fprintf(stderr, "cushim: serving /metrics on port %u of every address\n", (unsigned)port);
    else
        fprintf(stderr, "cushim: serving http://%s/metrics\n", shown);
    struct timespec tick = {1, 0};
    while (sigtimedwait(&stop_signals, NULL, &tick) < 0)
        cut_slow_connections();
    MHD_stop_daemon(d);
    if (cache.body) /* the cache's hold on the last body (every response is gone with the daemon) */
        body_release(cache.body);
    cache.body = NULL;
    return 0;
}
#else
int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_error("serve was not built (libmicrohttpd was not found at build time); use "
              "`cushim stat --prometheus --output FILE` with node_exporter's textfile collector");
    return EXIT_USAGE;
}
#endif
