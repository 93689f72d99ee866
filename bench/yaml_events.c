/*
 * The reference for `make bench`: libyaml's event parser alone over the given files, the floor
 * under anything that reads YAML with libyaml. Each event is produced and freed; nothing is kept.
 *
 *   cc -O2 bench/yaml_events.c -lyaml -o bench/out/yaml_events
 *   bench/out/yaml_events FILE...      prints the number of events; exits 1 on a parse error
 */
#include <stdio.h>
#include <yaml.h>

static long parse_file(const char *path) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        perror(path);
        return -1;
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fprintf(stderr, "%s: cannot initialise the parser\n", path);
        fclose(file);
        return -1;
    }
    yaml_parser_set_input_file(&parser, file);
    long events = 0;
    for (;;) {
        yaml_event_t event;
        if (!yaml_parser_parse(&parser, &event)) {
            fprintf(stderr, "%s:%lu:%lu: %s\n", path, (unsigned long)parser.problem_mark.line + 1,
                    (unsigned long)parser.problem_mark.column + 1,
                    parser.problem ? parser.problem : "parse error");
            events = -1;
            break;
        }
        int done = event.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&event);
        events++;
        if (done) break;
    }
    yaml_parser_delete(&parser);
    fclose(file);
    return events;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long events = parse_file(argv[i]);
        if (events < 0) return 1;
        total += events;
    }
    printf("%ld events\n", total);
    return 0;
}
