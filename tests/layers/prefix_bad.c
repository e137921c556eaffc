/* prefix_bad.c - a file exporting a name without its prefix: the fixture
 * layers_prefix_check_detects runs check_prefixes.py on, which must name it. */
int ds_wrong_module_name(int x);
int ds_wrong_module_name(int x) { return x + 1; }
int ds_prefix_bad_ok(int x);
int ds_prefix_bad_ok(int x) { return x - 1; }
