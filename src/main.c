/* gpuscale command dispatch (placeholder until the agent lands). */
#include <stdio.h>
int main(void) { return 0; }
