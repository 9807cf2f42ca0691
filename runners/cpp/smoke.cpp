// build.sh smoke test: run as /sandbox/main.cpp through sandbox.command.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

int main()
{
	std::vector<int> v(10);
	std::iota(v.begin(), v.end(), 1);
	long total = 0;
	std::thread t([&] { total = std::accumulate(v.begin(), v.end(), 0L); });
	t.join();
	std::map<std::string, int> m{{"b", 2}, {"a", 1}};
	if (total != 55 || m.begin()->first != "a" || std::abs(std::sqrt(16.0) - 4.0) > 1e-12)
		return 1;
	if (!std::is_sorted(v.begin(), v.end()))
		return 2;
	std::ofstream("/data/smoke.txt") << total << '\n';
	std::string line;
	std::getline(std::ifstream("/data/smoke.txt") >> std::ws, line);
	if (line != "55")
		return 3;
	std::cout << "uid " << getuid() << '\n' << "smoke ok" << std::endl;
}
