#define PICK(a, b, c) b
int v = PICK(1'x'"', __LINE__, '"');
