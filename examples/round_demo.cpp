// placeholder demo, replaced below
int main() { return 0; }
